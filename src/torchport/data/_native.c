/* torchport.data's native fast path: region JPEG decoding (libjpeg-turbo), lossless restart markers, pixel kernels.
 *
 * 1. tp_decode_region -- region + DCT-scaled JPEG decoding on the system's libjpeg-turbo (libjpeg API), reading
 *    only the restart segments a crop overlaps when the file has them (tp_add_restarts writes them losslessly).
 * 2. tp_hwc_to_chw    -- HWC uint8 -> CHW uint8 (+ horizontal flip): the resized crop into its batch slot.
 * 3. tp_normalise     -- uint8 -> float32 x * scale[c] + bias[c] (the consumer side of the CPU loader's uint8 ring).
 * 4. tp_hwc_to_chw_norm -- 2 and 3 in one pass (workers writing normalised float32 slots).
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

int tp_abi_version(void) { return 4; }

/* ------------------------------------------------------------------------------------------------ restart markers */
/* A sequential Huffman JPEG whose restart interval divides the MCUs of a row is a grid of segments, each k MCUs
 * wide and one MCU row high, that decode independently (the DC predictors restart at every marker). A crop then
 * needs only the segments it overlaps: tp_rst_sub copies them, with the headers (image size patched) and fresh
 * RST numbers, into a smaller JPEG whose blocks are the very same coefficients, so every pixel decodes to the same
 * value -- but Huffman decoding (60% of a worker's time) no longer covers the rows above or the columns beside the
 * crop. tp_add_restarts puts such markers into a file losslessly (coefficients copied, as `jpegtran -restart`). */
typedef struct {
  unsigned long sof_len; /* offset of the SOF segment's length field (height at +3, width at +5) */
  unsigned long data;    /* first byte of the entropy-coded data */
  int H, W, mw, mh, interval;
} tp_jinfo;

static int rd16(const unsigned char *p) { return (p[0] << 8) | p[1]; }

/* 1 when buf is a single-scan sequential Huffman JPEG with a restart interval (fills j), else 0. */
static int tp_parse(const unsigned char *b, unsigned long n, tp_jinfo *j) {
  unsigned long p = 2;
  int ncomp = 0, hmax = 1, vmax = 1, sof = 0;
  if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return 0;
  j->interval = 0;
  while (p + 4 <= n) {
    if (b[p] != 0xFF) return 0;
    while (p < n && b[p] == 0xFF) p++; /* fill bytes */
    if (p + 3 > n) return 0;
    int m = b[p++];
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) continue; /* no length */
    if (m == 0xD9) return 0;
    unsigned long len = (unsigned long)rd16(b + p);
    if (len < 2 || p + len > n) return 0;
    const unsigned char *s = b + p + 2;
    if (m == 0xC0 || m == 0xC1) {
      if (len < 8 || s[0] != 8) return 0;
      ncomp = s[5];
      if (ncomp < 1 || ncomp > 4 || len < 8 + 3 * (unsigned long)ncomp) return 0;
      j->sof_len = p;
      j->H = rd16(s + 1);
      j->W = rd16(s + 3);
      for (int c = 0; c < ncomp; c++) {
        int hs = s[7 + 3 * c] >> 4, vs = s[7 + 3 * c] & 15;
        if (hs > hmax) hmax = hs;
        if (vs > vmax) vmax = vs;
      }
      sof = 1;
    } else if (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      return 0; /* progressive, lossless, hierarchical or arithmetic-coded */
    } else if (m == 0xDD) {
      if (len < 4) return 0;
      j->interval = rd16(s);
    } else if (m == 0xDA) {
      if (!sof || j->H == 0 || j->W == 0 || s[0] != ncomp) return 0; /* H == 0: DNL; Ns != Nf: several scans */
      j->data = p + len;
      j->mw = ncomp == 1 ? 8 : 8 * hmax;
      j->mh = ncomp == 1 ? 8 : 8 * vmax;
      return j->interval > 0;
    }
    p += len;
  }
  return 0;
}

/* End of the segment starting at b[i]: index of the 0xFF that starts the next marker (fill bytes before it
 * included); *rst = 1 when that marker is RSTn, and *next is the first byte after it. */
static unsigned long tp_seg_end(const unsigned char *b, unsigned long i, unsigned long n, int *rst,
                                unsigned long *next) {
  *rst = 0;
  *next = n;
  for (;;) {
    const unsigned char *f = i < n ? memchr(b + i, 0xFF, n - i) : NULL;
    if (!f) return n;
    i = (unsigned long)(f - b);
    unsigned long q = i + 1;
    while (q < n && b[q] == 0xFF) q++; /* fill bytes before a marker */
    if (q >= n) return n;
    if (b[q] == 0x00) { /* stuffed 0xFF data byte */
      i = q + 1;
      continue;
    }
    *rst = b[q] >= 0xD0 && b[q] <= 0xD7;
    *next = q + 1;
    return i;
  }
}

/* Build the JPEG holding just the segments that the scaled region (x0, y0, w, h) at 1/denom overlaps.
 * Returns a malloc'd buffer (its size in *sub_n; the region's offset inside it subtracted from *x0 / *y0),
 * or NULL when the file has no usable restart grid or the grid would save nothing. */
static unsigned char *tp_rst_sub(const unsigned char *b, unsigned long n, int denom, int *x0, int *y0, int w, int h,
                                 unsigned long *sub_n) {
  tp_jinfo j = {0};
  if (!tp_parse(b, n, &j)) return NULL;
  int mpr = (j.W + j.mw - 1) / j.mw, rows = (j.H + j.mh - 1) / j.mh, k = j.interval;
  if (mpr % k) return NULL; /* segments would straddle rows */
  int cpr = mpr / k, cw = k * j.mw;
  long fx0 = (long)*x0 * denom, fy0 = (long)*y0 * denom;
  long fx1 = (long)(*x0 + w) * denom, fy1 = (long)(*y0 + h) * denom;
  if (fx1 > j.W) fx1 = j.W;
  if (fy1 > j.H) fy1 = j.H;
  int c0 = (int)(fx0 / cw), c1 = (int)((fx1 + cw - 1) / cw), r0 = (int)(fy0 / j.mh), r1 = (int)((fy1 + j.mh - 1) / j.mh);
  if (c1 > cpr) c1 = cpr;
  if (r1 > rows) r1 = rows;
  if (c0 >= c1 || r0 >= r1) return NULL;
  if (r0 == 0 && (long)(c1 - c0) * 10 >= (long)cpr * 9) return NULL; /* < 10% fewer segments than rows [0, r1) */
  long nseg = (long)(r1 - r0) * (c1 - c0), last = (long)(r1 - 1) * cpr + (c1 - 1);
  unsigned char *o = malloc(n + 2 * (size_t)nseg + 16);
  if (!o) return NULL;
  memcpy(o, b, j.data);
  unsigned long sp = j.sof_len, q = j.data;
  int sh = (r1 * j.mh < j.H ? r1 * j.mh : j.H) - r0 * j.mh, sw = (c1 * cw < j.W ? c1 * cw : j.W) - c0 * cw;
  o[sp + 3] = (unsigned char)(sh >> 8);
  o[sp + 4] = (unsigned char)sh;
  o[sp + 5] = (unsigned char)(sw >> 8);
  o[sp + 6] = (unsigned char)sw;
  unsigned long pos = j.data;
  long written = 0;
  for (long s = 0; s <= last; s++) {
    int rst;
    unsigned long next;
    unsigned long end = tp_seg_end(b, pos, n, &rst, &next);
    if (s < last && !rst) { /* fewer segments than the grid promises */
      free(o);
      return NULL;
    }
    int r = (int)(s / cpr), c = (int)(s % cpr);
    if (r >= r0 && c >= c0 && c < c1) {
      if (written) {
        o[q++] = 0xFF;
        o[q++] = (unsigned char)(0xD0 + ((written - 1) & 7));
      }
      memcpy(o + q, b + pos, end - pos);
      q += end - pos;
      written++;
    }
    pos = next;
  }
  o[q++] = 0xFF;
  o[q++] = 0xD9;
  *sub_n = q;
  *x0 -= c0 * cw / denom;
  *y0 -= r0 * j.mh / denom;
  return o;
}

/* Losslessly rewrite a sequential JPEG with a restart marker every k MCUs, k the largest divisor of the MCUs per
 * row that is at most chunk_px / MCU width (so the segments tile each row). The DCT coefficients and quantisation
 * tables are copied, Huffman tables re-optimised, APPn/COM markers kept. Returns 0 (*out malloc'd: tp_free it),
 * 1 when the file is progressive / arithmetic-coded / not 8-bit (left as it is), -1 on a libjpeg error (msg). */
int tp_add_restarts(const unsigned char *buf, unsigned long n, int chunk_px, unsigned char **out, unsigned long *out_n,
                    char *msg) {
  struct jpeg_decompress_struct src;
  struct jpeg_compress_struct dst;
  struct tp_err e;
  volatile int have_dst = 0;
  unsigned long cap = n + n / 4 + 4096, on = cap;
  unsigned char *mine = malloc(cap), *ob = mine;
  if (!mine) {
    snprintf(msg, JMSG_LENGTH_MAX, "out of memory");
    return -1;
  }
  src.err = jpeg_std_error(&e.pub);
  dst.err = &e.pub;
  e.pub.error_exit = tp_error_exit;
  e.pub.emit_message = tp_emit;
  if (setjmp(e.jb)) {
    (*e.pub.format_message)((j_common_ptr)&src, msg);
    if (have_dst) jpeg_destroy_compress(&dst);
    jpeg_destroy_decompress(&src);
    free(mine); /* a buffer libjpeg grew into instead is not ours to free here */
    return -1;
  }
  jpeg_create_decompress(&src);
  jpeg_mem_src(&src, buf, n);
  for (int m = 0; m < 16; m++) jpeg_save_markers(&src, JPEG_APP0 + m, 0xFFFF);
  jpeg_save_markers(&src, JPEG_COM, 0xFFFF);
  jpeg_read_header(&src, TRUE);
  if (src.progressive_mode || src.arith_code || src.data_precision != 8) {
    jpeg_destroy_decompress(&src);
    free(mine);
    return 1;
  }
  jvirt_barray_ptr *coef = jpeg_read_coefficients(&src);
  jpeg_create_compress(&dst);
  have_dst = 1;
  jpeg_copy_critical_parameters(&src, &dst);
  int mw = src.num_components == 1 ? 8 : 8 * src.max_h_samp_factor;
  int mpr = ((int)src.image_width + mw - 1) / mw, k = chunk_px / mw;
  if (k < 1) k = 1;
  while (k > 1 && mpr % k) k--;
  dst.restart_interval = (unsigned int)k;
  dst.optimize_coding = TRUE;
  jpeg_mem_dest(&dst, &ob, &on);
  jpeg_write_coefficients(&dst, coef);
  for (jpeg_saved_marker_ptr mk = src.marker_list; mk; mk = mk->next) {
    const JOCTET *d = mk->data;
    if (dst.write_JFIF_header && mk->marker == JPEG_APP0 && mk->data_length >= 5 && !memcmp(d, "JFIF", 5)) continue;
    if (dst.write_Adobe_marker && mk->marker == JPEG_APP0 + 14 && mk->data_length >= 5 && !memcmp(d, "Adobe", 5))
      continue;
    jpeg_write_marker(&dst, mk->marker, d, mk->data_length);
  }
  jpeg_finish_compress(&dst);
  jpeg_destroy_compress(&dst);
  jpeg_finish_decompress(&src);
  jpeg_destroy_decompress(&src);
  if (ob != mine) free(mine); /* libjpeg grew the output into a buffer of its own (malloc'd) */
  *out = ob;
  *out_n = on;
  return 0;
}

void tp_free(void *p) { free(p); }

/* Decode rows [y0, y0+h) x columns [x0, x0+w) of the image scaled by 1/denom (denom 1, 2, 4, 8) as
 * RGB into out (row stride out_stride bytes). colorspace 0 = RGB, 1 = YCbCr (no colour conversion;
 * profiling only). Returns 0; -1 (libjpeg error, message in msg, JMSG_LENGTH_MAX bytes); -2 bad region. */
static int tp_decode(const unsigned char *buf, unsigned long n, int denom, int fast, int colorspace, int x0, int y0,
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

/* tp_decode on the restart segments the region needs (when the file has a usable restart grid), else on the
 * whole file; use_rst = 0 forces the whole file. out_hw is the size of the image actually decoded. */
int tp_decode_region(const unsigned char *buf, unsigned long n, int denom, int fast, int colorspace, int x0, int y0,
                     int w, int h, unsigned char *out, long out_stride, int *out_hw, char *msg, int use_rst) {
  if (use_rst) {
    int sx = x0, sy = y0;
    unsigned long sn = 0;
    unsigned char *sub = tp_rst_sub(buf, n, denom, &sx, &sy, w, h, &sn);
    if (sub) {
      int rc = tp_decode(sub, sn, denom, fast, colorspace, sx, sy, w, h, out, out_stride, out_hw, msg);
      free(sub);
      if (rc == 0) return 0; /* otherwise: the whole file decides (and reports its own error) */
    }
  }
  return tp_decode(buf, n, denom, fast, colorspace, x0, y0, w, h, out, out_stride, out_hw, msg);
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
/* 16 RGB pixels at s + 3x (48 bytes) -> 16 R, 16 G, 16 B with three pshufb per plane (SSSE3), reversed when flip;
 * returns where they go in a row of w (x, or w - x - 16 when flipped). */
__attribute__((target("ssse3"))) static inline int deinterleave16(const uint8_t *s, int x, int w, int flip, __m128i *R,
                                                                 __m128i *G, __m128i *B) {
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
  const uint8_t *p = s + 3 * x;
  __m128i a = _mm_loadu_si128((const __m128i *)p);
  __m128i bq = _mm_loadu_si128((const __m128i *)(p + 16));
  __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
  *R = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ra), _mm_shuffle_epi8(bq, rb)), _mm_shuffle_epi8(c, rc));
  *G = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ga), _mm_shuffle_epi8(bq, gb)), _mm_shuffle_epi8(c, gc));
  *B = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, ba), _mm_shuffle_epi8(bq, bb)), _mm_shuffle_epi8(c, bc));
  if (!flip) return x;
  *R = _mm_shuffle_epi8(*R, rev);
  *G = _mm_shuffle_epi8(*G, rev);
  *B = _mm_shuffle_epi8(*B, rev);
  return w - x - 16;
}

/* One row: 16 RGB pixels at a time -> three uint8 planes (flipped if asked). */
__attribute__((target("ssse3"))) static void hwc_to_chw_row_ssse3(const uint8_t *s, uint8_t *r, uint8_t *g, uint8_t *b,
                                                                 int w, int flip) {
  int x = 0;
  for (; x + 16 <= w; x += 16) {
    __m128i R, G, B;
    int o = deinterleave16(s, x, w, flip, &R, &G, &B);
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


/* 16 float32 values v * sc + bi (a multiply, then an add: the same rounding as numpy) from 16 uint8 in v8. */
#ifdef TP_X86
__attribute__((target("ssse3"))) static inline void norm16(__m128i v8, float *d, __m128 vs, __m128 vb) {
  const __m128i z = _mm_setzero_si128();
  __m128i lo = _mm_unpacklo_epi8(v8, z), hi = _mm_unpackhi_epi8(v8, z);
  __m128 a = _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)), vs), vb);
  __m128 b = _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)), vs), vb);
  __m128 c = _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)), vs), vb);
  __m128 e = _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)), vs), vb);
  if (((uintptr_t)d & 15) == 0) { /* streaming: the float batch is far larger than the cache */
    _mm_stream_ps(d, a);
    _mm_stream_ps(d + 4, b);
    _mm_stream_ps(d + 8, c);
    _mm_stream_ps(d + 12, e);
  } else {
    _mm_storeu_ps(d, a);
    _mm_storeu_ps(d + 4, b);
    _mm_storeu_ps(d + 8, c);
    _mm_storeu_ps(d + 12, e);
  }
}

/* One row: 16 RGB pixels at a time -> three float planes (flipped if asked), normalised. */
__attribute__((target("ssse3"))) static void hwc_to_chw_norm_row_ssse3(const uint8_t *s, float *r, float *g, float *b,
                                                                      int w, int flip, const float *sc,
                                                                      const float *bi) {
  const __m128 sr = _mm_set1_ps(sc[0]), sg = _mm_set1_ps(sc[1]), sb = _mm_set1_ps(sc[2]);
  const __m128 br = _mm_set1_ps(bi[0]), bg = _mm_set1_ps(bi[1]), bb_ = _mm_set1_ps(bi[2]);
  int x = 0;
  for (; x + 16 <= w; x += 16) {
    __m128i R, G, B;
    int o = deinterleave16(s, x, w, flip, &R, &G, &B);
    norm16(R, r + o, sr, br);
    norm16(G, g + o, sg, bg);
    norm16(B, b + o, sb, bb_);
  }
  for (int xx = x; xx < w; xx++) { /* tail: the last w % 16 source pixels */
    int o = flip ? w - 1 - xx : xx;
    r[o] = (float)s[3 * xx] * sc[0] + bi[0];
    g[o] = (float)s[3 * xx + 1] * sc[1] + bi[1];
    b[o] = (float)s[3 * xx + 2] * sc[2] + bi[2];
  }
}
#endif

static void norm_row_scalar(const uint8_t *s, float *r, float *g, float *b, int w, int flip, const float *sc,
                            const float *bi) {
  for (int x = 0; x < w; x++) {
    int xs = flip ? w - 1 - x : x;
    r[x] = (float)s[3 * xs] * sc[0] + bi[0];
    g[x] = (float)s[3 * xs + 1] * sc[1] + bi[1];
    b[x] = (float)s[3 * xs + 2] * sc[2] + bi[2];
  }
}

/* The row driver of both entry points below: uint8 planes when scale is NULL, else normalised float32 planes. */
static void hwc_rows(const uint8_t *src, long src_stride, void *dst, int h, int w, int flip, const float *scale,
                     const float *bias) {
  long plane = (long)h * w;
#ifdef TP_X86
  int simd = __builtin_cpu_supports("ssse3");
#endif
  for (int y = 0; y < h; y++) {
    const uint8_t *s = src + (long)y * src_stride;
    if (scale) {
      float *r = (float *)dst + (long)y * w, *g = r + plane, *b = g + plane;
#ifdef TP_X86
      if (simd) {
        hwc_to_chw_norm_row_ssse3(s, r, g, b, w, flip, scale, bias);
        continue;
      }
#endif
      norm_row_scalar(s, r, g, b, w, flip, scale, bias);
      continue;
    }
    uint8_t *r = (uint8_t *)dst + (long)y * w, *g = r + plane, *b = g + plane;
#ifdef TP_X86
    if (simd) {
      hwc_to_chw_row_ssse3(s, r, g, b, w, flip);
      continue;
    }
#endif
    hwc_to_chw_scalar(s, r, g, b, 0, w, flip);
  }
#ifdef TP_X86
  _mm_sfence(); /* the float rows used streaming stores */
#endif
}

/* src: h x w x 3 (row stride src_stride bytes) -> dst: 3 planes of h x w (plane stride h*w), flipped if asked. */
void tp_hwc_to_chw(const uint8_t *src, long src_stride, uint8_t *dst, int h, int w, int flip) {
  hwc_rows(src, src_stride, dst, h, w, flip, NULL, NULL);
}

/* tp_hwc_to_chw and tp_normalise in one pass: src h x w x 3 uint8 (row stride src_stride bytes) -> dst: 3 float32
 * planes of h x w, flipped if asked, channel c = v * scale[c] + bias[c] (same bytes as the two kernels). */
void tp_hwc_to_chw_norm(const uint8_t *src, long src_stride, float *dst, int h, int w, int flip, const float *scale,
                        const float *bias) {
  hwc_rows(src, src_stride, dst, h, w, flip, scale, bias);
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
