"""`ragline ask --sample`: the sample is indexed once, and an unchanged sample is not indexed again."""

import os
import subprocess
import sys

from tests.scripted_model import Reply


def test_the_sample_is_indexed_on_first_use_and_an_unchanged_sample_says_nothing(fresh_data_dir, scripted_model):
    scripted_model.on(lambda body: True, Reply.text("Pairing takes about three minutes."))

    def ask() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ragline", "ask", "--sample", "How long does pairing take?"],
                              capture_output=True, text=True, timeout=300, env=os.environ)

    first = ask()
    assert first.returncode == 0, first.stderr
    assert "indexing the sample knowledge base:" in first.stderr
    second = ask()
    assert second.returncode == 0, second.stderr
    assert "indexing" not in second.stderr
    assert "Pairing takes about three minutes." in second.stdout
