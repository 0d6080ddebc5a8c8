//! The handle table's invariant check ([`HandleTable::check`]), run by the
//! pool's `check_invariants` and the tests.

use super::{HandleTable, NIL, RETIRED_CHUNK};
use crate::handle::entry::{generation_of, place_of};
use crate::handle::{CHUNK, DYING, LIVE, MAX_GENERATION, PARKED, RETIRED};
use crate::sync::atomic::Ordering;

impl HandleTable {
    /// Check the table's own invariants.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        if self.base_gen.len() != self.chunks.len() {
            return Err(format!(
                "{} chunk bases for {} chunks",
                self.base_gen.len(),
                self.chunks.len()
            ));
        }
        let (mut live, mut parked, mut retired_slots, mut retired_chunks) = (0, 0, 0, 0);
        for (c, chunk) in self.chunks.iter().enumerate() {
            let room_bit = self
                .with_room
                .get(c / 64)
                .is_some_and(|w| w & (1 << (c % 64)) != 0);
            let base = self.base_gen[c];
            if base > MAX_GENERATION {
                return Err(format!("chunk {c}: base generation {base}"));
            }
            let Some(chunk) = chunk else {
                if room_bit {
                    return Err(format!("released chunk {c} is marked as having room"));
                }
                if c < self.absent_hint && base != RETIRED_CHUNK {
                    return Err(format!(
                        "released chunk {c} is below the search start {}",
                        self.absent_hint
                    ));
                }
                retired_chunks += usize::from(base == RETIRED_CHUNK);
                continue;
            };
            if base == RETIRED_CHUNK {
                return Err(format!("retired chunk index {c} is present"));
            }
            let words: Vec<u64> = chunk
                .entries
                .iter()
                .map(|e| e.word.load(Ordering::Relaxed))
                .collect();
            let mut on_free = [false; CHUNK];
            let mut i = chunk.free_head;
            while i != NIL {
                let w = *words
                    .get(i as usize)
                    .ok_or_else(|| format!("chunk {c}: free list leads to {i}"))?;
                if std::mem::replace(&mut on_free[i as usize], true) {
                    return Err(format!("chunk {c}: slot {i} is on the free list twice"));
                }
                if w & LIVE != 0 {
                    return Err(format!("chunk {c}: slot {i} is live and on the free list"));
                }
                if w & DYING != 0 {
                    return Err(format!("chunk {c}: slot {i} is free and dying"));
                }
                if w == RETIRED {
                    return Err(format!(
                        "chunk {c}: slot {i} is retired and on the free list"
                    ));
                }
                i = place_of(w);
            }
            let chunk_live = words.iter().filter(|&&w| w & LIVE != 0).count();
            let chunk_parked = words
                .iter()
                .filter(|&&w| w & (LIVE | PARKED) == PARKED)
                .count();
            let retired = words.iter().filter(|&&w| w == RETIRED).count();
            let free = on_free.iter().filter(|&&f| f).count();
            if chunk_live + chunk_parked != chunk.live as usize
                || chunk_live + chunk_parked + free + retired != CHUNK
            {
                return Err(format!(
                    "chunk {c}: {chunk_live} live and {chunk_parked} parked entries, \
                     counter {}, {free} free, {retired} retired",
                    chunk.live
                ));
            }
            let chunk_live = chunk_live + chunk_parked;
            if chunk_live == 0 && self.directory.is_none() && self.spare != Some(c) {
                return Err(format!("chunk {c} is empty but was not released"));
            }
            if self.spare == Some(c) && chunk_live != 0 {
                return Err(format!("spare chunk {c} holds {chunk_live} objects"));
            }
            if room_bit != (free > 0) {
                return Err(format!(
                    "chunk {c}: room bit {room_bit} with {free} free slots"
                ));
            }
            // A retired entry is exactly `RETIRED` (counted above); every
            // other one has a generation its chunk can hand out.
            if let Some(i) = words
                .iter()
                .position(|&w| w != RETIRED && generation_of(w) < base)
            {
                return Err(format!(
                    "chunk {c}: slot {i} has generation {} below the chunk's base {base}",
                    generation_of(words[i])
                ));
            }
            if self.magazines {
                // Parked in magazines: held, counted as live.
                live += chunk_live;
            } else {
                live += chunk_live - chunk_parked;
                parked += chunk_parked;
            }
            retired_slots += retired;
        }
        if (live, parked) != (self.live, self.parked) {
            return Err(format!(
                "{live} live and {parked} parked entries, counters {} and {}",
                self.live, self.parked
            ));
        }
        if (retired_slots, retired_chunks) != (self.retired_slots, self.retired_chunks) {
            return Err(format!(
                "{retired_slots} retired slots and {retired_chunks} retired chunks, \
                 counters {} and {}",
                self.retired_slots, self.retired_chunks
            ));
        }
        Ok(())
    }
}
