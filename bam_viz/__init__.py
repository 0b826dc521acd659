"""bam-viz: see attention uncertainty in Bayesian Attention Modules (Fan et al., NeurIPS 2020)."""

from bam_viz.families import kl as _kl  # noqa: F401  registers KL(Weibull || Gamma) with torch.distributions

__all__ = ["available_models", "load"]


def available_models() -> list[str]:
    """Names of the shipped models in `pretrained/`."""
    from bam_viz.zoo import available_models as _available

    return _available()


def load(name: str | None = None, device: str | None = None, *, path=None):
    """Load a shipped model by name (or a trained model's folder, `path=`) onto `device` (default:
    chosen once, see `bam_viz.core.device`)."""
    from bam_viz.zoo import load as _load

    return _load(name, device=device, path=path)
