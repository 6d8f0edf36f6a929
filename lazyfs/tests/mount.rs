//! Through the real kernel: a lazy file system mounted in a temp dir, what reaches the
//! backing directory, and what a power loss leaves there.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use common::{or_skip, wait_until, Mounted};

#[test]
fn power_loss_leaves_exactly_the_synced_bytes() {
    let Some(()) = or_skip("power_loss_leaves_exactly_the_synced_bytes") else {
        return;
    };
    let mut m = Mounted::new();
    {
        let mut f = File::create(m.m("log")).unwrap();
        f.write_all(b"synced;").unwrap();
        f.sync_all().unwrap();
        f.write_all(b"not synced").unwrap();
        assert_eq!(
            fs::read(m.m("log")).unwrap(),
            b"synced;not synced",
            "reads see the cache"
        );
        assert_eq!(
            fs::metadata(m.m("log")).unwrap().len(),
            17,
            "size counts unsynced writes"
        );
        assert_eq!(fs::read(m.b("log")).unwrap(), b"synced;");
    }
    assert_eq!(m.control.unsynced_bytes(), 10);
    let dropped = m.power_loss();
    assert_eq!(dropped, 10);
    assert_eq!(fs::read(m.b("log")).unwrap(), b"synced;");
}

#[test]
fn fdatasync_of_one_file_leaves_another_unsynced() {
    let Some(()) = or_skip("fdatasync_of_one_file_leaves_another_unsynced") else {
        return;
    };
    let mut m = Mounted::new();
    let a = File::create(m.m("a")).unwrap();
    let b = File::create(m.m("b")).unwrap();
    a.write_all_at(b"aaaa", 0).unwrap();
    b.write_all_at(b"bbbbbb", 0).unwrap();
    a.sync_data().unwrap();
    assert_eq!(fs::read(m.b("a")).unwrap(), b"aaaa");
    assert_eq!(
        fs::read(m.b("b")).unwrap(),
        b"",
        "b was created but none of its data synced"
    );
    assert_eq!(m.control.unsynced_bytes(), 6);
    drop((a, b));
    let dropped = m.power_loss();
    assert_eq!(dropped, 6);
    assert_eq!(fs::read(m.b("b")).unwrap(), b"");
}

#[test]
fn truncates_and_o_trunc_are_lazy_until_fsync() {
    let Some(()) = or_skip("truncates_and_o_trunc_are_lazy_until_fsync") else {
        return;
    };
    let mut m = Mounted::new();
    fs::write(m.b("t"), b"0123456789").unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.m("t"))
        .unwrap();
    f.set_len(4).unwrap();
    assert_eq!(fs::read(m.m("t")).unwrap(), b"0123");
    f.set_len(6).unwrap();
    assert_eq!(
        fs::read(m.m("t")).unwrap(),
        b"0123\0\0",
        "extending reads zeros, not old bytes"
    );
    assert_eq!(fs::read(m.b("t")).unwrap(), b"0123456789");
    f.sync_all().unwrap();
    assert_eq!(fs::read(m.b("t")).unwrap(), b"0123\0\0");
    drop(f);
    // O_TRUNC is a size change too: nothing is cut on the backing file without a sync.
    File::create(m.m("t")).unwrap().write_all(b"new").unwrap();
    assert_eq!(fs::read(m.m("t")).unwrap(), b"new");
    let dropped = m.power_loss();
    assert_eq!(dropped, 3);
    assert_eq!(fs::read(m.b("t")).unwrap(), b"0123\0\0");
}

#[test]
fn rename_is_durable_at_once_and_unsynced_data_follows_the_file() {
    let Some(()) = or_skip("rename_is_durable_at_once_and_unsynced_data_follows_the_file") else {
        return;
    };
    let mut m = Mounted::new();
    let mut f = File::create(m.m("tmp")).unwrap();
    f.write_all(b"base").unwrap();
    f.sync_all().unwrap();
    f.write_all(b"+lazy").unwrap();
    fs::write(m.m("dst"), b"replaced").unwrap(); // unsynced data of a file the rename replaces
    fs::rename(m.m("tmp"), m.m("dst")).unwrap();
    assert!(
        !m.b("tmp").exists(),
        "the rename reached the backing directory"
    );
    assert_eq!(fs::read(m.m("dst")).unwrap(), b"base+lazy");
    // The replaced file's bytes go with it (once its RELEASE, asynchronous, has come).
    assert!(
        wait_until(10, || m.control.unsynced_bytes() == 5),
        "{}",
        m.control.unsynced_bytes()
    );
    let mut again = File::open(m.m("dst")).unwrap();
    let mut s = String::new();
    again.read_to_string(&mut s).unwrap();
    assert_eq!(
        s, "base+lazy",
        "a new open by the new name sees the cached data"
    );
    drop((f, again));
    let dropped = m.power_loss();
    assert_eq!(dropped, 5);
    assert_eq!(fs::read(m.b("dst")).unwrap(), b"base");
}

#[test]
fn unlink_drops_the_cache_once_the_last_handle_closes() {
    let Some(()) = or_skip("unlink_drops_the_cache_once_the_last_handle_closes") else {
        return;
    };
    let m = Mounted::new();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.m("gone"))
        .unwrap();
    f.write_all_at(b"12345", 0).unwrap();
    fs::remove_file(m.m("gone")).unwrap();
    let mut buf = [0; 5];
    f.read_exact_at(&mut buf, 0)
        .unwrap_or_else(|e| panic!("open-unlinked file must stay readable: {e}"));
    assert_eq!((&buf, m.control.unsynced_bytes()), (b"12345", 5));
    drop(f); // RELEASE reaches the file system after close(2) returns
    assert!(
        wait_until(10, || m.control.unsynced_bytes() == 0),
        "still {}",
        m.control.unsynced_bytes()
    );
}

#[test]
fn directories_and_names_pass_through() {
    let Some(()) = or_skip("directories_and_names_pass_through") else {
        return;
    };
    let m = Mounted::new();
    fs::create_dir_all(m.m("d/e")).unwrap();
    fs::write(m.m("d/e/f"), b"x").unwrap();
    std::os::unix::fs::symlink("e/f", m.m("d/l")).unwrap();
    fs::hard_link(m.m("d/e/f"), m.m("d/h")).unwrap();
    let mut names: Vec<_> = fs::read_dir(m.m("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["e", "h", "l"]);
    assert_eq!(
        fs::read(m.m("d/l")).unwrap(),
        b"x",
        "through the symlink, from the cache"
    );
    assert_eq!(
        fs::read(m.m("d/h")).unwrap(),
        b"x",
        "the hard link shares the cache"
    );
    fs::rename(m.m("d"), m.m("z")).unwrap();
    assert_eq!(fs::read(m.m("z/e/f")).unwrap(), b"x");
    fs::remove_file(m.m("z/e/f")).unwrap();
    fs::remove_dir(m.m("z/e")).unwrap();
    assert!(m.b("z/h").exists() && !m.b("z/e").exists());
}

#[test]
fn after_a_power_loss_nothing_runs_and_nothing_persists() {
    let Some(()) = or_skip("after_a_power_loss_nothing_runs_and_nothing_persists") else {
        return;
    };
    let mut m = Mounted::new();
    fs::write(m.m("f"), b"before").unwrap();
    let mnt = m.mnt.path().to_path_buf();
    assert_eq!(m.control.power_loss(), 6);
    // Another process, so that its stuck request does not hold up this test process's exit
    // (which ends the FUSE connection and with it the stuck request).
    let mut late = std::process::Command::new("sh")
        .args(["-c", r#"printf late >> "$0/f"; sync "$0/f"; : > "$0/new""#])
        .arg(&mnt)
        .spawn()
        .unwrap();
    let finished = wait_until(2, || late.try_wait().unwrap().is_some());
    let _ = late.kill();
    assert_eq!(m.power_loss(), 0, "already frozen; now detached");
    assert!(!finished, "an operation ran on a frozen file system");
    assert_eq!(
        fs::read(m.b("f")).unwrap(),
        b"",
        "nothing reached the backing file"
    );
    assert!(!m.b("new").exists());
}

#[test]
fn o_dsync_writes_are_synced_and_sync_2_is_not_seen() {
    let Some(()) = or_skip("o_dsync_writes_are_synced_and_sync_2_is_not_seen") else {
        return;
    };
    use std::os::unix::fs::OpenOptionsExt;
    let m = Mounted::new();
    // O_DSYNC: the kernel follows each write with an FSYNC request of its own.
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(nix::fcntl::OFlag::O_DSYNC.bits())
        .open(m.m("dsync"))
        .unwrap();
    f.write_all(b"each write").unwrap();
    assert_eq!(fs::read(m.b("dsync")).unwrap(), b"each write");
    // sync(2) does not make it durable: this file system has no syncfs callback (fuser
    // offers none), so only fsync/fdatasync of the file do, as in LazyFS.
    fs::write(m.m("plain"), b"12345").unwrap();
    assert!(std::process::Command::new("sync")
        .status()
        .unwrap()
        .success());
    assert_eq!(fs::read(m.b("plain")).unwrap(), b"");
    assert_eq!(m.control.unsynced_bytes(), 5);
}
