/* torchport.data's native fast path: region JPEG decoding (libjpeg-turbo) and two byte-shuffling kernels.
 *
 * 1. tp_decode_region -- region + DCT-scaled JPEG decoding on the system's libjpeg-turbo (libjpeg API).
 * 2. tp_hwc_to_chw    -- HWC uint8 -> CHW uint8 (+ horizontal flip): the resized crop into its batch slot.
 * 3. tp_normalise     -- uint8 -> float32 x * scale[c] + bias[c] (the consumer side of the CPU loader).
 * Each has a numpy fallback in Python giving identical bytes (no FMA contraction: -ffp-contract=off).
 *
 * tp_decode_region decodes only what a crop needs: rows below the crop are never entropy-decoded (the decode stops
 * there), rows above are skipped with jpeg_skip_scanlines (entropy-decoded, no IDCT / upsampling /
 * colour conversion), and columns outside the crop are skipped with jpeg_crop_scanline (no IDCT,
 * no colour conversion). With fast IDCT + non-fancy upsampling every output pixel depends on its
 * own 8x8 block(s) only, so the region is bit-identical to the same region of a full decode; the
 * Python side checks that in the tests and widens the region by `margin` pixels otherwise.
 *
 * Built on first use by torchport.data.decode (cc -O2 -shared -fPIC ... -ljpeg) and called via ctypes
 * (which releases the GIL). Not a Python extension: no Python headers, no build step at install time.
 */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

struct tp_err {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
};

static void tp_error_exit(j_common_ptr c) { longjmp(((struct tp_err *)c->err)->jb, 1); }

/* libjpeg warnings (level -1: corrupt data it could recover from) are errors, as in simplejpeg's strict mode. */
static void tp_emit(j_common_ptr c, int level) {
  if (level < 0) tp_error_exit(c);
}

int tp_abi_version(void) { return 2; }

/* Decode rows [y0, y0+h) x columns [x0, x0+w) of the image scaled by 1/denom (denom 1, 2, 4, 8) as
 * RGB into out (row stride out_stride bytes). colorspace 0 = RGB, 1 = YCbCr (no colour conversion;
 * profiling only). Returns 0; -1 (libjpeg error, message in msg, JMSG_LENGTH_MAX bytes); -2 bad region. */
int tp_decode_region(const unsigned char *buf, unsigned long n, int denom, int fast, int colorspace, int x0, int y0,
                     int w, int h, unsigned char *out, long out_stride, int *out_hw, char *msg) {
  struct jpeg_decompress_struct ci;
  struct tp_err e;
  unsigned char *volatile row = NULL;
  ci.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = tp_error_exit;
  e.pub.emit_message = tp_emit;
  if (setjmp(e.jb)) {
    (*ci.err->format_message)((j_common_ptr)&ci, msg);
    jpeg_destroy_decompress(&ci);
    free(row);
    return -1;
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, buf, n);
  jpeg_read_header(&ci, TRUE);
  ci.out_color_space = colorspace == 1 ? JCS_YCbCr : JCS_RGB;
  ci.scale_num = 1;
  ci.scale_denom = denom;
  ci.dct_method = fast ? JDCT_IFAST : JDCT_ISLOW;
  ci.do_fancy_upsampling = fast ? FALSE : TRUE;
  jpeg_start_decompress(&ci);
  out_hw[0] = (int)ci.output_height;
  out_hw[1] = (int)ci.output_width;
  if (ci.output_components != 3 || x0 < 0 || y0 < 0 || w <= 0 || h <= 0 || x0 + w > (int)ci.output_width ||
      y0 + h > (int)ci.output_height) {
    snprintf(msg, JMSG_LENGTH_MAX, "region %dx%d+%d+%d outside the %ux%u image (%d components)", w, h, x0, y0,
             ci.output_width, ci.output_height, ci.output_components);
    jpeg_destroy_decompress(&ci);
    return -2;
  }
  JDIMENSION xo = (JDIMENSION)x0, cw = (JDIMENSION)w;
  if (x0 > 0 || w < (int)ci.output_width) jpeg_crop_scanline(&ci, &xo, &cw); /* xo: iMCU boundary <= x0 */
  row = malloc((size_t)ci.output_width * 3 + 64);
  if (!row) {
    snprintf(msg, JMSG_LENGTH_MAX, "out of memory");
    jpeg_destroy_decompress(&ci);
    return -1;
  }
  if (y0 > 0) jpeg_skip_scanlines(&ci, (JDIMENSION)y0);
  for (int r = 0; r < h; r++) {
    JSAMPROW rp = row;
    if (jpeg_read_scanlines(&ci, &rp, 1) != 1) {
      snprintf(msg, JMSG_LENGTH_MAX, "no scanline %d", y0 + r);
      jpeg_destroy_decompress(&ci);
      free(row);
      return -1;
    }
    memcpy(out + (long)r * out_stride, row + (size_t)(x0 - (int)xo) * 3, (size_t)w * 3);
  }
  jpeg_abort_decompress(&ci); /* the rows below the region are never decoded */
  jpeg_destroy_decompress(&ci);
  free(row);
  return 0;
}

/* ------------------------------------------------------------------------------------------------ kernels */
#if defined(__x86_64__) || defined(__i386__)
#include <tmmintrin.h>
#define TP_X86 1
#endif

static void hwc_to_chw_scalar(const uint8_t *s, uint8_t *r, uint8_t *g, uint8_t *b, int x0, int w, int flip) {
  for (int x = x0; x < w; x++) {
    int xs = flip ? w - 1 - x : x;
    r[x] = s[3 * xs];
    g[x] = s[3 * xs + 1];
    b[x] = s[3 * xs + 2];
  }
}

#ifdef TP_X86
/* 16 RGB pixels (48 bytes) -> 16 R, 16 G, 16 B with three pshufb per plane (SSSE3). */
__attribute__((target("ssse3"))) static void hwc_to_chw_row_ssse3(const uint8_t *s, uint8_t *r, uint8_t *g, uint8_t *b,
                                                                 int w, int flip) {
  const __m128i ra = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i rb = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
  const __m128i rc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
  const __m128i ga = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i gb = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
  const __m128i gc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
  const __m128i ba = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i bb = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
  const __m128i bc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
  const __m128i rev = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  int x = 0;
  for (; x + 16 <= w; x += 16) {
    const uint8_t *p = s + 3 * x;
    __m128i a = _mm_loadu_si128((const __m128i *)p);
    __m128i bq = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i R = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ra), _mm_shuffle_epi8(bq, rb)), _mm_shuffle_epi8(c, rc));
    __m128i G = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ga), _mm_shuffle_epi8(bq, gb)), _mm_shuffle_epi8(c, gc));
    __m128i B = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ba), _mm_shuffle_epi8(bq, bb)), _mm_shuffle_epi8(c, bc));
    int o = x;
    if (flip) {
      R = _mm_shuffle_epi8(R, rev);
      G = _mm_shuffle_epi8(G, rev);
      B = _mm_shuffle_epi8(B, rev);
      o = w - x - 16;
    }
    _mm_storeu_si128((__m128i *)(r + o), R);
    _mm_storeu_si128((__m128i *)(g + o), G);
    _mm_storeu_si128((__m128i *)(b + o), B);
  }
  if (x < w) { /* tail: the last w % 16 source pixels */
    for (int xx = x; xx < w; xx++) {
      int o = flip ? w - 1 - xx : xx;
      r[o] = s[3 * xx];
      g[o] = s[3 * xx + 1];
      b[o] = s[3 * xx + 2];
    }
  }
}
#endif

/* src: h x w x 3 (row stride src_stride bytes) -> dst: 3 planes of h x w (plane stride h*w), flipped if asked. */
void tp_hwc_to_chw(const uint8_t *src, long src_stride, uint8_t *dst, int h, int w, int flip) {
  long plane = (long)h * w;
#ifdef TP_X86
  int simd = __builtin_cpu_supports("ssse3");
#endif
  for (int y = 0; y < h; y++) {
    const uint8_t *s = src + (long)y * src_stride;
    uint8_t *r = dst + (long)y * w, *g = r + plane, *b = g + plane;
#ifdef TP_X86
    if (simd) {
      hwc_to_chw_row_ssse3(s, r, g, b, w, flip);
      continue;
    }
#endif
    hwc_to_chw_scalar(s, r, g, b, 0, w, flip);
  }
}

#ifdef TP_X86
#include <emmintrin.h>
/* 16 values per step; streaming (non-temporal) stores: a 64-image float batch (38 MB at 224 px) does not
 * fit in cache, so skipping the read-for-ownership of every destination line saves a third of the traffic. */
static void normalise_plane_sse2(const uint8_t *s, float *d, long n, float sc, float bi) {
  long k = 0;
  while (k < n && ((uintptr_t)(d + k) & 15)) {
    d[k] = (float)s[k] * sc + bi;
    k++;
  }
  const __m128 vs = _mm_set1_ps(sc), vb = _mm_set1_ps(bi);
  const __m128i z = _mm_setzero_si128();
  for (; k + 16 <= n; k += 16) {
    __m128i v = _mm_loadu_si128((const __m128i *)(s + k));
    __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
    _mm_stream_ps(d + k, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)), vs), vb));
    _mm_stream_ps(d + k + 4, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)), vs), vb));
    _mm_stream_ps(d + k + 8, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)), vs), vb));
    _mm_stream_ps(d + k + 12, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)), vs), vb));
  }
  for (; k < n; k++) d[k] = (float)s[k] * sc + bi;
}
#endif

/* n planes of `plane` uint8 values (channel c = plane index % 3) -> float32 v * scale[c] + bias[c]
 * (a multiply, then an add, each rounded to float32: the same bytes as numpy's two passes). */
void tp_normalise(const uint8_t *restrict src, float *restrict dst, long plane, long nplanes, const float *scale,
                  const float *bias) {
  for (long i = 0; i < nplanes; i++) {
    const uint8_t *s = src + i * plane;
    float *d = dst + i * plane;
    const float sc = scale[i % 3], bi = bias[i % 3];
#ifdef TP_X86
    normalise_plane_sse2(s, d, plane, sc, bi);
#else
    for (long k = 0; k < plane; k++) d[k] = (float)s[k] * sc + bi;
#endif
  }
#ifdef TP_X86
  _mm_sfence();
#endif
}
