

async def test_a_new_sqlite_saver_can_delete_a_thread_before_any_write(tmp_path):
    from ragline.checkpoints.savers import sqlite_saver

    async with sqlite_saver(tmp_path / "fresh.sqlite") as saver:
        await saver.adelete_thread("never-written")  # no "no such table" error
