/* Region + DCT-scaled JPEG decoding on the system's libjpeg-turbo (libjpeg API), for torchport.data.decode.
 *
 * Decodes only what a crop needs: rows below the crop are never entropy-decoded (the decode stops
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

int tp_abi_version(void) { return 1; }

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
