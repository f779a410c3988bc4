"""What a link or an image in a model's answer may do in the window (G1; F4/P5: the answer is untrusted).

A model's answer is text from outside: a prompt-injected agent can write ``[the report](/home/me/.ssh/id_rsa)``
or ``![x](/home/me/secret.png)``. Qt's text browser would read such files itself — on a click (navigating
the message view to the file) or, for images, as soon as the text is laid out — outside every backend
check. So in the transcript:

- no resource is ever read for an answer: ``no_resource`` stands in for every image or style sheet the
  document asks for (``markdown_render`` also turns images into their alt text, so none is asked for);
- a click on a link never navigates the message view; ``open_link`` opens an ``http``/``https`` link in the
  system's browser (as ``setOpenExternalLinks(True)`` did before) and nothing else: a ``file:`` URL, a
  relative or absolute path, ``qrc:``, ``data:``, ``javascript:``… is only shown, as text, in a tool tip.
"""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QColor, QDesktopServices, QImage, QTextDocument

#: The only schemes a click on an answer's link opens (in the system's browser).
WEB_SCHEMES = frozenset({"http", "https"})


def is_web_link(url: QUrl) -> bool:
    """An absolute ``http``/``https`` URL with a host: the only kind an answer's link may open."""
    return url.isValid() and url.scheme().lower() in WEB_SCHEMES and bool(url.host())


def open_link(url: QUrl) -> bool:
    """Open a clicked link of an answer if it is a web link, in the system's browser; False (nothing done)
    for any other."""
    if not is_web_link(url):
        return False
    QDesktopServices.openUrl(url)
    return True


def refusal_text(url: QUrl) -> str:
    """What the tool tip says about a link that is not opened: its target, as text."""
    target = url.toString()
    if len(target) > 200:
        target = target[:199] + "…"
    return f"Not opened (only http and https links open, in your browser): {target}"


_PLACEHOLDER: QImage | None = None


def no_resource(kind: int) -> object:
    """What an answer's document gets for any resource it asks for (``QTextDocument.ResourceType``
    ``kind``): for an image a 1×1 transparent image, else empty text — never the file or URL named. The
    value is not null, so ``QTextDocument`` does not fall back to reading the file itself."""
    global _PLACEHOLDER
    if int(getattr(kind, "value", kind)) != QTextDocument.ResourceType.ImageResource.value:
        return ""
    if _PLACEHOLDER is None:
        image = QImage(1, 1, QImage.Format.Format_ARGB32)
        image.fill(QColor(0, 0, 0, 0))
        _PLACEHOLDER = image
    return _PLACEHOLDER


__all__ = ["WEB_SCHEMES", "is_web_link", "no_resource", "open_link", "refusal_text"]
