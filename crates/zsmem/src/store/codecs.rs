//! The store's codec table: the primary codec, the secondary codecs of
//! recompression by priority, and the dictionaries trained later.
//!
//! Each stored slot records the table index of the codec its object was
//! made with, so a slot always decodes with its own codec even after the
//! store's primary changed. Entries are only ever appended (at most
//! [`MAX_CODECS`]), so a reader finds its codec without a lock.
//!
//! Priority, as zram's `recomp_algorithm priority=N`: the primary codecs
//! (index 0 and dictionaries trained later) are priority 0; secondary codec
//! `k` (1-based, in the order configured) is priority `k`. Recompression
//! tries only codecs of a higher priority than the slot's.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use super::PageStore;
use super::slot::{Kind, MAX_CODECS};
use crate::codec::{Codec, CodecSpec, ZstdDictionary};
use crate::error::{Error, Result};
use crate::sync::Mutex;

#[derive(Debug)]
pub(crate) struct Codecs {
    entries: [OnceLock<(CodecSpec, u8)>; MAX_CODECS],
    /// Entries used; appends hold `append`.
    len: AtomicU8,
    /// The entry new pages are compressed with.
    primary: AtomicU8,
    /// Secondary codecs' entries, by priority (priority `k` at `k - 1`).
    secondary: Box<[u8]>,
    append: Mutex<()>,
}

impl Codecs {
    pub(crate) fn new(primary: CodecSpec, secondary: &[CodecSpec]) -> Result<Codecs> {
        if secondary.len() + 1 > MAX_CODECS {
            return Err(Error::InvalidConfig(format!(
                "{} secondary codecs: a store takes at most {}",
                secondary.len(),
                MAX_CODECS - 1
            )));
        }
        primary.validate()?;
        let entries: [OnceLock<(CodecSpec, u8)>; MAX_CODECS] = Default::default();
        let _ = entries[0].set((primary, 0));
        for (k, spec) in secondary.iter().enumerate() {
            spec.validate()?;
            let _ = entries[k + 1].set((spec.clone(), k as u8 + 1));
        }
        Ok(Codecs {
            entries,
            len: AtomicU8::new(secondary.len() as u8 + 1),
            primary: AtomicU8::new(0),
            secondary: (1..=secondary.len() as u8).collect(),
            append: Mutex::new(()),
        })
    }

    /// The entry at `index`, which a slot recorded (so it exists).
    pub(crate) fn get(&self, index: u8) -> &CodecSpec {
        &self.entry(index).0
    }

    fn entry(&self, index: u8) -> &(CodecSpec, u8) {
        self.entries[usize::from(index)]
            .get()
            .expect("slots only record codec entries that exist")
    }

    pub(crate) fn priority(&self, index: u8) -> u8 {
        self.entry(index).1
    }

    /// Index of the codec new pages use.
    pub(crate) fn primary(&self) -> u8 {
        self.primary.load(Ordering::Acquire)
    }

    /// Table indices of the secondary codecs, priority 1 first.
    pub(crate) fn secondary(&self) -> &[u8] {
        &self.secondary
    }

    /// Append `spec` as a primary codec and make it the one new pages use.
    fn push_primary(&self, spec: CodecSpec) -> Result<()> {
        spec.validate()?;
        let _g = self.append.lock();
        let i = self.len.load(Ordering::Relaxed);
        if usize::from(i) >= MAX_CODECS {
            return Err(Error::InvalidConfig(format!(
                "the store's codec table is full ({MAX_CODECS} codecs): no more dictionaries"
            )));
        }
        let _ = self.entries[usize::from(i)].set((spec, 0));
        self.len.store(i + 1, Ordering::Release);
        // Release: a thread that sees the new primary sees its entry.
        self.primary.store(i, Ordering::Release);
        Ok(())
    }

    pub(crate) fn metadata_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.secondary.len()
            + (0..self.len.load(Ordering::Acquire))
                .filter_map(|i| self.entries[usize::from(i)].get())
                .filter_map(|(s, _)| s.dictionary.as_ref().map(ZstdDictionary::len))
                .sum::<usize>()
    }
}

impl PageStore {
    /// The codec new pages are compressed with.
    pub fn codec(&self) -> &CodecSpec {
        self.codecs.get(self.codecs.primary())
    }

    /// Compress new pages with zstd and `dictionary` from now on (at the
    /// primary codec's level, or zstd's 3 if the primary is not zstd). Pages
    /// already stored keep the codec they were made with. A store takes at
    /// most 15 dictionaries over its life.
    pub fn set_dictionary(&self, dictionary: ZstdDictionary) -> Result<()> {
        let level = match self.codec().codec {
            Codec::Zstd { level } => level,
            _ => 3,
        };
        self.codecs.push_primary(CodecSpec {
            codec: Codec::Zstd { level },
            dictionary: Some(dictionary),
        })
    }

    /// Train a zstd dictionary of at most `max_size` bytes from up to
    /// `max_samples` pages now stored (slots holding an object, lowest
    /// first), and use it for new pages ([`set_dictionary`]). Returns it, to
    /// share with other stores.
    ///
    /// [`set_dictionary`]: PageStore::set_dictionary
    pub fn train_dictionary(&self, max_size: usize, max_samples: usize) -> Result<ZstdDictionary> {
        let mut samples = Vec::new();
        let mut page = vec![0u8; self.page_size];
        for index in self.slots.present() {
            let Some(slot) = self.slots.get(index) else {
                continue;
            };
            if samples.len() >= max_samples {
                break;
            }
            let s = slot.lock();
            if s.kind() == Kind::Stored {
                self.decode(index, &s, &mut page)?;
                samples.push(page.clone());
            }
        }
        let dict = ZstdDictionary::train(&samples, max_size)?;
        self.set_dictionary(dict.clone())?;
        Ok(dict)
    }
}
