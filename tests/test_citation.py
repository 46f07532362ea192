"""Issue 23: the licence and citation files exist, agree with pyproject, and cite every paper a
law names as its source."""

from __future__ import annotations

import re
from pathlib import Path

from delphi.laws import LAWS
from delphi.laws.curves import ANNEALING, MULTIPOWER

ROOT = Path(__file__).resolve().parents[1]
ARXIV = re.compile(r"\b(\d{4}\.\d{4,5})\b")


def test_license_file_is_the_apache_2_licence_pyproject_declares():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'license = "Apache-2.0"' in pyproject and 'license-files = ["LICENSE"]' in pyproject
    assert "license: Apache-2.0" in (ROOT / "CITATION.cff").read_text()


def test_every_law_source_is_cited_in_both_files():
    cff = (ROOT / "CITATION.cff").read_text()
    bib = (ROOT / "docs" / "citing.md").read_text()
    assert cff.startswith("cff-version: 1.2.0") and "@software{delphi," in bib
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert f'version: "{version}"' in cff and f"version = {{{version}}}" in bib
    cited_cff, cited_bib = set(ARXIV.findall(cff)), set(ARXIV.findall(bib))
    assert cited_cff == cited_bib
    sources = {law.name: set(ARXIV.findall(law.source or ""))
               for law in [*LAWS.values(), ANNEALING, MULTIPOWER]}
    missing = {name: ids - cited_bib for name, ids in sources.items() if ids - cited_bib}
    assert not missing, f"laws citing papers not in docs/citing.md: {missing}"
    assert len(set().union(*sources.values())) >= 8
