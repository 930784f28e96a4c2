"""Reports people look at: self-contained HTML (or Markdown) about verified results.

=====================  ==========================================================
module                 job
=====================  ==========================================================
``document``           the document model every report is built as; number format
``charts``             hand-sized SVG bar-chart geometry and histogram bins
``html``               document → one standalone page (Jinja2, autoescaped, CSP)
``markdown``           document → GitHub-flavoured Markdown (escaped)
``bundle_facts``       one verification pass gathering a bundle's facts
``bundle``             the bundle report's document
``conformance``        a ``kiln-verify.conformance-report.v2`` file (or v1) read strictly,
                       its document
``collectable``        whether kiln-verify can collect from an endpoint, from its cases
``evaluation``         an evaluation receipt re-derived from its bundles, its document
``replay_input``       a saved ``openenv replay --json`` result, read strictly
``replay_diffs``       every kept drifted exchange as a diff, by candidate
``replay``             the replay report's document (drift, or a clean replay)
``engine``             build, render and publish a report (the front ends' one call)
=====================  ==========================================================

A report is a pure function of its inputs (byte-identical for the same inputs, no
timestamps) and is built only from inputs the library has verified or read strictly; see
docs/reports.md.
"""

from __future__ import annotations
