"""kiln_verify.core.lazy: a package's names resolve on first use, once, and only theirs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kiln_verify.core.lazy import lazy_exports


def test_a_name_imports_its_module_on_first_use_and_is_kept() -> None:
    probe = (
        "import sys\n"
        "import kiln_verify.openenv.collect as c\n"
        "assert 'kiln_verify.openenv.collect.run' not in sys.modules\n"
        "first = c.run_collection\n"
        "assert 'kiln_verify.openenv.collect.run' in sys.modules\n"
        "assert vars(c)['run_collection'] is first\n"
        "assert 'publish_together' in dir(c)\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_an_unknown_name_is_an_attribute_error_naming_the_package() -> None:
    getattr_, dir_ = lazy_exports("kiln_verify.core", {"lazy_exports": "kiln_verify.core.lazy"})
    with pytest.raises(AttributeError, match=r"module 'kiln_verify\.core' has no attribute 'x'"):
        getattr_("x")
    assert "lazy_exports" in dir_()
