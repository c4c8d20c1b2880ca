"""ImageDecoder (20): decode an encoded image through Pillow (the optional extra onnxrt[image])."""

from __future__ import annotations

import io

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun

PIXEL_FORMATS = ("RGB", "BGR", "Grayscale")


def _pillow():
    try:
        from PIL import Image  # noqa: PLC0415  (optional dependency, imported when first needed)
    except ImportError as e:
        raise KernelError(
            "ImageDecoder needs Pillow, which onnxrt does not install by default; "
            "install the optional extra with 'pip install onnxrt[image]'."
        ) from e
    return Image


def image_decoder(encoded_stream: np.ndarray, pixel_format: str = "RGB", check=None) -> np.ndarray:
    """Decode ``encoded_stream`` (1-D uint8: BMP, JPEG, JPEG 2000, TIFF, PNG, WebP, PNM...)
    into a uint8 (H, W, 3) image in RGB or BGR order, or (H, W, 1) for ``Grayscale``.

    Pillow decodes (JPEG through libjpeg-turbo, whose default chroma upsampling is the
    "fancy" one the spec describes); multi-frame files give their first frame. As the spec
    says, a stream that cannot be decoded gives an empty image, of shape (0, 0, channels).
    ``check(shape, dtype, what="output")`` (the node's ``check_alloc``) vets the size the
    header announces before decoding.
    """
    image_module = _pillow()
    data = np.asarray(encoded_stream)
    if data.ndim != 1:
        raise KernelError(f"encoded_stream must be 1-D, got shape {list(data.shape)}.")
    channels = 1 if pixel_format == "Grayscale" else 3
    try:
        with image_module.open(io.BytesIO(data.tobytes())) as img:
            if check is not None:  # the header's size, before Pillow decodes
                check([img.height, img.width, channels], np.uint8)
            img.load()
            decoded = np.asarray(img.convert("L" if channels == 1 else "RGB"), dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, image_module.DecompressionBombError):
        # the spec: "If it can't decode for any reason ... it will return an empty matrix"
        return np.zeros((0, 0, channels), dtype=np.uint8)
    if channels == 1:
        return decoded.reshape(decoded.shape[0], decoded.shape[1], 1).copy()
    if pixel_format == "BGR":
        return np.ascontiguousarray(decoded[:, :, ::-1])
    return decoded.copy() if not decoded.flags.writeable else decoded


@register("ImageDecoder", versions=(20,))
class ImageDecoder(OpRun):
    """ImageDecoder 20 (pixel_format RGB, BGR or Grayscale). See :func:`image_decoder`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("pixel_format", PIXEL_FORMATS)

    def _run(self, encoded_stream, attributes=None, verbose=0, fLOG=None):
        return (image_decoder(encoded_stream, self.pixel_format, self.check_alloc),)
