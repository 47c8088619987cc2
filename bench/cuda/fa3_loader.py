"""FlashAttention-3 for the anchor scripts: the PyPI wheel fa3-fwd (forward kernels only, import
fa3_fwd_interface), which scripts/fetch_fa3.sh downloads and scripts/device.sh installs.

The wheel's kernels need a Hopper GPU (sm_90) and its extension the PyTorch it was built against
(2.10 for fa3-fwd 0.0.3): elsewhere it does not load, and the anchors skip FA3 with the reason.
"""


def load_fa3():
    """(fa3_fwd_interface, None), or (None, why FA3 cannot run here)."""
    import torch
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        return None, "FlashAttention-3 needs a Hopper GPU (sm_90)"
    try:
        import fa3_fwd_interface
    except Exception as err:  # ImportError, or the extension's own error under another PyTorch
        text = str(err).splitlines()[0][:200] if str(err) else ""
        return None, f"fa3_fwd_interface does not import: {type(err).__name__}: {text}"
    return fa3_fwd_interface, None


def fa3_version():
    """The installed fa3-fwd's version, or None."""
    try:
        from importlib.metadata import version
        return version("fa3_fwd")
    except Exception:  # not installed, or installed without its metadata
        return None
