//! FUSE inode numbers and the backing path each one was last seen at. No I/O.
//!
//! A FUSE inode is the backing file's st_ino, except that the backing root's st_ino and
//! FUSE's fixed root number 1 trade places (a bijection, so no two files share a number and
//! readdir's d_ino matches stat's st_ino). The backing directory must be one file system:
//! st_ino alone names a file only within one.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const ROOT: u64 = 1;

#[derive(Debug)]
struct Node {
    /// Relative to the backing root ("" is the root).
    path: PathBuf,
    /// The kernel's lookup count: the node is kept until the kernel forgets it.
    lookups: u64,
}

#[derive(Debug)]
pub struct Inodes {
    root_backing_ino: u64,
    nodes: HashMap<u64, Node>,
}

impl Inodes {
    pub fn new(root_backing_ino: u64) -> Self {
        let root = Node {
            path: PathBuf::new(),
            lookups: 1,
        };
        Self {
            root_backing_ino,
            nodes: HashMap::from([(ROOT, root)]),
        }
    }

    /// The FUSE number of a backing st_ino (its own inverse).
    pub fn fuse_ino(&self, backing_ino: u64) -> u64 {
        match backing_ino {
            i if i == self.root_backing_ino => ROOT,
            ROOT => self.root_backing_ino,
            i => i,
        }
    }

    /// The backing st_ino of a FUSE number.
    pub fn backing_ino(&self, fuse_ino: u64) -> u64 {
        self.fuse_ino(fuse_ino)
    }

    pub fn path(&self, ino: u64) -> Option<&Path> {
        self.nodes.get(&ino).map(|n| n.path.as_path())
    }

    /// The kernel learned `ino` under `path` (lookup, create, mkdir, link): counts the lookup
    /// and takes this name as the node's path (for a hard link, the last name looked up).
    pub fn remember(&mut self, ino: u64, path: PathBuf) {
        let node = self.nodes.entry(ino).or_insert(Node {
            path: PathBuf::new(),
            lookups: 0,
        });
        node.path = path;
        node.lookups += 1;
    }

    /// The kernel dropped `n` lookups; the node goes with the last (never the root).
    pub fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
            if node.lookups == 0 {
                self.nodes.remove(&ino);
            }
        }
    }

    /// A rename moved `from` to `to`: every node at or below `from` follows.
    pub fn renamed(&mut self, from: &Path, to: &Path) {
        for node in self.nodes.values_mut() {
            if let Ok(rest) = node.path.strip_prefix(from) {
                node.path = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_inode_one_trade_places() {
        let t = Inodes::new(42);
        assert_eq!(
            (t.fuse_ino(42), t.fuse_ino(1), t.fuse_ino(7)),
            (ROOT, 42, 7)
        );
        assert_eq!((t.backing_ino(ROOT), t.backing_ino(42)), (42, 1));
    }

    #[test]
    fn rename_moves_a_subtree_and_not_its_namesakes() {
        let mut t = Inodes::new(2);
        t.remember(10, "d".into());
        t.remember(11, "d/f".into());
        t.remember(12, "dd".into());
        t.renamed(Path::new("d"), Path::new("e/x"));
        assert_eq!(t.path(10), Some(Path::new("e/x")));
        assert_eq!(t.path(11), Some(Path::new("e/x/f")));
        assert_eq!(
            t.path(12),
            Some(Path::new("dd")),
            "\"dd\" is not under \"d\""
        );
    }

    #[test]
    fn a_node_lives_until_its_last_lookup_is_forgotten() {
        let mut t = Inodes::new(2);
        t.remember(10, "a".into());
        t.remember(10, "b".into()); // a hard link: the last name wins
        t.forget(10, 1);
        assert_eq!(t.path(10), Some(Path::new("b")));
        t.forget(10, 1);
        assert_eq!(t.path(10), None);
        t.forget(ROOT, 5);
        assert_eq!(t.path(ROOT), Some(Path::new("")));
    }
}
