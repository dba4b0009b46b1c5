"""The paper's claims, each tested as the paper states it, with our numbers, their intervals and a verdict.

Every claim quotes the paper's sentence (``paper-summary.txt``, with its section) and carries the one
criterion that tests exactly that sentence: "leads at every tested data fraction" is tested at every
fraction, not as "the gain is larger at small data". A verdict is one of

- ``holds``: every inequality the criterion needs holds with its interval (a strict one, "beats",
  "leads": the 95 % paired bootstrap interval of the margin lies above 0; one a tie meets, "best or
  tied", "does not help": the interval does not lie wholly below 0);
- ``does not hold``: some inequality is refuted by its interval (a strict margin's interval at or
  below 0, a tie-passing one's wholly below 0);
- ``inconclusive``: none is refuted but some interval straddles 0: the test split and seeds cannot tell
  that difference from noise;
- ``no data``: the runs the criterion needs are not in this configuration (never a guess).

Every margin is an :class:`hnclip.analysis.bootstrap.Estimate` built from the tables' cells, so its
interval is the paired bootstrap of :mod:`hnclip.analysis.bootstrap`: both sides on the same resampled
test images (and seeds, paired by seed where they share them). A verdict carries each condition with its
interval (``conditions``), how many are decided, and the deciding margin's interval and resolution (the
difference that split and seeds detect with 80 % power). "The strongest competitor" is chosen by point
value, then paired. The premise figures (§2.4, appendix C) are measurements over every logged micro-batch
of a run, not samples of test queries: they are judged on their values and say so (no interval).

Inputs are the tables of :mod:`hnclip.analysis.tables` (R@1 as the mean of the two directions where the
paper says "average R@1", seeds already averaged), the experiment specs (which groups are in-domain),
evaluation records (the seeds' six metrics) and the premise measurements of §2.4 / appendix C as one
flat dict (:data:`PREMISE_KEYS`). Each verdict also carries ``measures``: named numbers that
``report/published_numbers.yaml`` puts beside the paper's (``{kind: claim, claim: ID, measure: NAME}``).

At toy scale the synthetic benchmark stands in for the paper's: a criterion about DOCCI is tested on the
main table's first benchmark, one about the DCI<->DOCCI transfers on every configured transfer pair; the
criterion text says so whenever it happens.

The package: :mod:`~hnclip.analysis.claims.base` holds the registry, the verdict logic and table access;
one module per paper section (main, plugin, transfer, fractions, ablation, seeds, premise, cost) holds its
claims, each one function registered with ``@claim(id, section, quote, title)``, the one place its id
is written (the function reads it as ``ctx.claim``; ``ctx.verdict`` and ``ctx.no_data`` use it). The registry's order
(:data:`SECTIONS`, then each module's definition order) is the report's. A new claim is one
such function plus its entry in ``report/published_numbers.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from hnclip.analysis.bootstrap import BootstrapSettings

# importing the section modules registers their claims (SECTIONS below sets their order)
from hnclip.analysis.claims import ablation, cost, fractions, main, plugin, seeds, transfer  # noqa: F401
from hnclip.analysis.claims import premise as premise_section  # noqa: F401
from hnclip.analysis.claims.base import (
    ABLATION_ROWS,
    REGISTRY,
    VERDICTS,
    Claim,
    Context,
    ablation_rows,
    collapsed_baselines,
    in_domain_groups,
    label_of,
    order_registry,
    roles_of,
    row_methods,
    seed_noise,
    use_settings,
    use_variants,
)
from hnclip.analysis.claims.main import power_notes
from hnclip.analysis.claims.premise import check_premise
from hnclip.analysis.premise import PREMISE_KEYS

__all__ = ["ABLATION_ROWS", "CLAIMS", "PREMISE_KEYS", "REGISTRY", "VERDICTS", "Claim", "ablation_rows",
           "check_premise", "collapsed_rows", "evaluate_claims", "in_domain_groups", "power_notes", "row_methods", "seed_noise"]

# the report's order: these paper sections (modules), then each module's definition order
SECTIONS = ("main", "plugin", "transfer", "fractions", "ablation", "seeds", "premise", "cost")
order_registry([f"{__name__}.{section}" for section in SECTIONS])
# id -> (section, the paper's sentence as paper-summary.txt gives it, short title), in the report's order
CLAIMS: dict[str, tuple[str, str, str]] = {c.id: (c.section, c.quote, c.title) for c in REGISTRY.values()}


def evaluate_claims(tables: Mapping[str, pd.DataFrame], scale: str, specs: Mapping[str, Mapping] | None = None,
                    records: Sequence[Mapping] | None = None, premise: Mapping | None = None,
                    caption_words: Mapping[str, float] | None = None,
                    dynamics: Mapping[str, pd.DataFrame] | None = None,
                    settings: BootstrapSettings | None = None, costs: Sequence[Mapping] | None = None) -> list[dict]:
    """Verdicts on every claim of :data:`CLAIMS`, in that order.

    ``tables``: experiment name -> table (main, plugin, transfer, fractions, gamma_sweep, ablation, seeds,
    and ``epochs``: :func:`hnclip.analysis.tables.build_epochs_table`); ``specs``: experiment specs (which
    groups are in-domain; the seeds' cells); ``records``: evaluation records (the seeds' six metrics);
    ``premise``: the §2.4 / appendix C measurements (:data:`PREMISE_KEYS`); ``caption_words``: mean
    caption length per benchmark label; ``dynamics``: HN runs' logs (the gradient-ratio peak, a measure);
    ``costs``: the main table's runs' training cost (the speed-up claim, :mod:`.cost`).

    ``settings``: the intervals' (default: the tables' own, from the config's ``statistics``).

    HN-CLIP, its frozen-G variant, GOAL and the ablation's variants are found by method key (the specs'
    ``roles``, :data:`hnclip.plan.ABLATION_ROLES`; see :func:`row_methods`), never by display label: a
    renamed label changes the criterion and evidence text, not what is judged.

    Each verdict: ``id, section, quote, claim, criterion, holds (True/False/None), verdict (one of
    VERDICTS), evidence, measures, noise (the seed-to-seed R@1 change, shown beside), scale, coverage
    (what a partly tested claim left out), missing (why there is no data), conditions (each inequality with
    its interval and status), decided, interval (the deciding margin's interval and resolution),
    confidence``.
    """
    ctx = _context(tables, scale, specs, settings, records=records, premise=premise, caption_words=caption_words,
                   dynamics=dynamics, costs=costs)
    return [c.judge(replace(ctx, claim=c.id)) for c in REGISTRY.values()]


def collapsed_rows(tables: Mapping[str, pd.DataFrame], specs: Mapping[str, Mapping] | None = None,
                   settings: BootstrapSettings | None = None) -> dict[str, dict]:
    """The main table's baselines that end at or below the zero-shot backbone
    (:func:`hnclip.analysis.claims.base.collapsed_baselines`): the report's first screen lists them."""
    return collapsed_baselines(_context(tables, "", specs, settings))


def _context(tables, scale, specs, settings, **inputs) -> Context:
    """The context every claim is judged in (and the interval settings put in force)."""
    specs = specs or {}
    if settings is None:
        settings = next((t.attrs["statistics"] for t in tables.values()
                         if t is not None and isinstance(t.attrs.get("statistics"), BootstrapSettings)),
                        BootstrapSettings())
    use_settings(settings)
    roles, methods = roles_of(specs), row_methods(tables, specs)
    hn_row, frozen_row = label_of(methods, roles["reference"]), label_of(methods, roles["frozen"])
    if frozen_row not in methods:  # no frozen-G run: its name in the criterion text
        frozen_row = f"{hn_row} (frozen G)"
    use_variants(label for label, m in methods.items() if m == roles["frozen"])
    return Context(tables=tables, specs=specs, scale=scale, noise=seed_noise(tables.get("seeds")), hn_row=hn_row,
                   frozen_row=frozen_row, roles=roles, methods=methods, **inputs)
