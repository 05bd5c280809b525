import pytest

from ragline.models import cpu


def _times(monkeypatch, before, after):
    samples = iter([before, after])
    monkeypatch.setattr(cpu, "_cpu_times", lambda: next(samples))
    monkeypatch.setattr(cpu.time, "sleep", lambda s: None)


@pytest.mark.parametrize(("busy_jiffies", "free"), [(0, 2), (40, 2), (60, 1), (100, 1), (200, 1)])
def test_a_core_busy_at_least_half_the_sample_is_left_alone(monkeypatch, busy_jiffies, free):
    _times(monkeypatch, (0, 0), (busy_jiffies, 200))  # 2 cores x 100 jiffies sampled
    assert cpu.free_cores(2) == free


def test_without_proc_stat_every_core_is_used(monkeypatch):
    _times(monkeypatch, None, None)
    assert cpu.free_cores(4) == 4


def test_proc_stat_parses_on_this_machine():
    times = cpu._cpu_times()
    assert times is None or 0 <= times[0] <= times[1]


@pytest.mark.parametrize(("flags", "amx"), [("fpu avx2 avx512f amx_bf16 amx_tile amx_int8", True), ("fpu avx2 avx512f", False), ("fpu amx_tiles", False)])
def test_amx_is_read_from_the_flags_line(tmp_path, flags, amx):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\nmodel name\t: amx_tile in a name is no flag\nflags\t\t: {flags}\n")
    assert cpu.advertises_amx(str(info)) is amx


def test_without_cpuinfo_amx_is_not_assumed(tmp_path):
    assert cpu.advertises_amx(str(tmp_path / "missing")) is False
