"""The roles the analysis compares: the method keys every spec carries (``roles``), the zero-shot row, the
ablation's variants. The experiments themselves are :mod:`hnclip.experiments`."""

from __future__ import annotations

__all__ = ["ABLATION_ROLES", "BASELINE_METHOD", "FROZEN_METHOD", "REFERENCE_METHOD", "ZEROSHOT_ROW", "competitor_key",
           "spec_roles"]


# The backbone before fine-tuning: the first row of the main and transfer tables, a reference every
# fine-tuned model is compared with (not a training run: its cells name no run folder).
ZEROSHOT_ROW = "Zero-shot backbone"


# The roles the analysis compares, by method key (config ``methods``), declared here once and carried by
# every spec (``roles``): tables, figures, claims and the gallery find rows by these keys, so a renamed
# display label (``methods.<key>.label``) changes what is shown, never what is found.
REFERENCE_METHOD = "hnclip"  # the paper's method, HN-CLIP


BASELINE_METHOD = "longclip"  # its plain fine-tuning baseline, Long-CLIP FT


FROZEN_METHOD = "hnclip_frozen"  # HN-CLIP with frozen margins G (appendix B.2): a variant, not a competitor


# The ablation's variants by what they train (method key, whether the HN term is on, i.e. gamma > 0).
ABLATION_ROLES = {"infonce": (BASELINE_METHOD, False), "hn": ("longclip_hn", True),
                  "token": (REFERENCE_METHOD, False), "full": (REFERENCE_METHOD, True),
                  "frozen": (FROZEN_METHOD, True)}


def spec_roles(config: dict | None = None) -> dict[str, str | None]:
    """The method keys a spec's readers compare (``spec["roles"]``): reference, baseline, frozen, and the
    config's ``competitor`` (the strongest baseline on val, from the tuning record; None when unset)."""
    return {"reference": REFERENCE_METHOD, "baseline": BASELINE_METHOD, "frozen": FROZEN_METHOD,
            "competitor": (config or {}).get("competitor")}


def competitor_key(roles: dict) -> str:
    """The method key of "the strongest competitor": the one chosen on val (``roles.competitor``, the config's
    ``competitor`` from the tuning record), else plain fine-tuning (``roles.baseline``). Never chosen on test:
    the claims, the regime's headline and the gallery compare HN-CLIP with this one method."""
    return roles.get("competitor") or roles.get("baseline") or BASELINE_METHOD
