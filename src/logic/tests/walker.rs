// SPDX-License-Identifier: GPL-2.0
#![cfg(not(loom))]
use std::collections::HashMap;
use unwind_logic::walker::{walk, Stop, UserMemory, UserRegs, Windowed, WordReader, WINDOW_WORDS};

const USER_END: u64 = 0x7fff_ffff_f000;

/// A fake user stack: word-addressed memory with optional holes; counts frame reads.
#[derive(Default)]
struct Mem(HashMap<u64, u64>, usize);

impl UserMemory for Mem {
    fn read_frame(&mut self, fp: u64) -> Option<[u64; 2]> {
        self.1 += 1;
        Some([*self.0.get(&fp)?, *self.0.get(&(fp + 8))?])
    }
}

const PAGE: u64 = 4096;

/// The same fake memory read a word run at a time; records every call as (addr, words).
#[derive(Default)]
struct Words(HashMap<u64, u64>, Vec<(u64, usize)>);

impl WordReader for Words {
    fn read_words(&mut self, addr: u64, out: &mut [u64]) -> usize {
        self.1.push((addr, out.len()));
        let mut n = 0;
        while n < out.len() {
            let Some(&w) = self.0.get(&(addr + 8 * n as u64)) else {
                break;
            };
            out[n] = w;
            n += 1;
        }
        n
    }
}

fn windowed(mem: &Mem) -> Windowed<Words> {
    Windowed::new(Words(mem.0.clone(), Vec::new()), PAGE)
}

/// Builds a chain of `depth` frames above `sp`; returns (mem, regs, expected output).
fn chain(depth: usize) -> (Mem, UserRegs, Vec<u64>) {
    let sp = 0x7ffd_0000_0000u64;
    let mut mem = Mem::default();
    let mut expected = vec![0x40_1000];
    let mut fp = sp + 0x40;
    let first_fp = fp;
    for i in 0..depth {
        let next = if i + 1 == depth { 0 } else { fp + 0x30 };
        let ret = 0x40_2000 + i as u64 * 0x10;
        mem.0.insert(fp, next);
        mem.0.insert(fp + 8, ret);
        // The frame's locals, as on a real stack (read ahead by windowed readers).
        for local in (16..0x30).step_by(8) {
            mem.0.insert(fp + local, 0x5eed);
        }
        expected.push(ret);
        fp = next;
    }
    (
        mem,
        UserRegs {
            ip: 0x40_1000,
            sp,
            fp: first_fp,
        },
        expected,
    )
}

#[test]
fn walks_whole_chain_in_order() {
    let (mut mem, regs, expected) = chain(100);
    let mut out = [0u64; 510];
    let (n, stop) = walk(&mut mem, regs, USER_END, &mut out);
    assert_eq!(stop, Stop::End);
    assert_eq!(&out[..n], &expected[..]);
    assert_eq!(n, 101);
    assert_eq!(mem.1, 100, "one read per frame record");
}

#[test]
fn windowed_reads_give_the_same_walk_with_fewer_reads() {
    // Frames 0x30 bytes apart: a 256-byte window holds five records.
    let (mem, regs, expected) = chain(100);
    let mut win = windowed(&mem);
    let mut out = [0u64; 510];
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (101, Stop::End));
    assert_eq!(&out[..101], &expected[..]);
    let calls = &win.reader().1;
    assert!(
        calls.len() <= 100 / 4,
        "{} reads for 100 frames",
        calls.len()
    );
    for &(addr, words) in calls {
        assert!((2..=WINDOW_WORDS).contains(&words));
        // Read-ahead stays in the page of the record it was made for.
        assert_eq!(
            addr / PAGE,
            (addr + 8 * words as u64 - 1) / PAGE,
            "{addr:#x}+{words}"
        );
    }
}

#[test]
fn windowed_reads_a_record_that_straddles_a_page_end() {
    let sp = 0x7ffd_0000_0000u64;
    let fp = sp + PAGE - 8; // next fp in this page, return address in the next
    let mut mem = Mem::default();
    mem.0.insert(fp, 0);
    mem.0.insert(fp + 8, 0x40_2000);
    let regs = UserRegs {
        ip: 0x40_1000,
        sp,
        fp,
    };
    let mut win = windowed(&mem);
    let mut out = [0u64; 8];
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (2, Stop::End));
    assert_eq!(win.reader().1, vec![(fp, 2)]);
}

#[test]
fn windowed_reads_stop_at_the_same_fault_as_direct_reads() {
    for hole in 0..10 {
        let (mut mem, regs, _) = chain(10);
        let mut fp = regs.fp;
        for _ in 0..hole {
            fp = mem.0[&fp];
        }
        mem.0.remove(&(fp + 8));
        let mut direct = [0u64; 64];
        let mut win_out = [0u64; 64];
        let d = walk(&mut mem, regs, USER_END, &mut direct);
        let w = walk(&mut windowed(&mem), regs, USER_END, &mut win_out);
        assert_eq!(d, (hole + 1, Stop::Fault));
        assert_eq!(w, d);
        assert_eq!(direct, win_out);
    }
}

#[test]
fn stops_when_output_is_full() {
    let (mut mem, regs, expected) = chain(1000);
    let mut out = [0u64; 510];
    let (n, stop) = walk(&mut mem, regs, USER_END, &mut out);
    assert_eq!((n, stop), (510, Stop::Full));
    assert_eq!(&out[..], &expected[..510]);
}

#[test]
fn stops_cleanly_on_fault_keeping_what_it_has() {
    let (mut mem, regs, expected) = chain(10);
    // Unmap the 6th frame record.
    let mut fp = regs.fp;
    for _ in 0..5 {
        fp = mem.0[&fp];
    }
    mem.0.remove(&fp);
    let mut out = [0u64; 64];
    let (n, stop) = walk(&mut mem, regs, USER_END, &mut out);
    assert_eq!(stop, Stop::Fault);
    assert_eq!(&out[..n], &expected[..6]);
}

#[test]
fn rejects_loops_misalignment_and_out_of_bounds() {
    // A cycle: frame points to itself.
    let (mut mem, regs, _) = chain(3);
    mem.0.insert(regs.fp, regs.fp);
    let mut out = [0u64; 64];
    let (n, stop) = walk(&mut mem, regs, USER_END, &mut out);
    assert_eq!((n, stop), (2, Stop::Invalid));

    // Misaligned frame pointer.
    let (mut mem, mut regs, _) = chain(3);
    regs.fp += 4;
    assert_eq!(walk(&mut mem, regs, USER_END, &mut out), (1, Stop::Invalid));

    // Frame pointer below the stack pointer.
    let (mut mem, mut regs, _) = chain(3);
    regs.fp = regs.sp - 0x100;
    assert_eq!(walk(&mut mem, regs, USER_END, &mut out), (1, Stop::Invalid));

    // Frame pointer in kernel space.
    let (mut mem, mut regs, _) = chain(3);
    regs.fp = 0xffff_8880_0000_0000;
    assert_eq!(walk(&mut mem, regs, USER_END, &mut out), (1, Stop::Invalid));

    // Return address in kernel space.
    let (mut mem, regs, _) = chain(3);
    mem.0.insert(regs.fp + 8, 0xffff_ffff_8100_0000);
    assert_eq!(walk(&mut mem, regs, USER_END, &mut out), (1, Stop::Invalid));
}

#[test]
fn no_frame_pointer_gives_just_the_ip() {
    let mut mem = Mem::default();
    let regs = UserRegs {
        ip: 0x40_1000,
        sp: 0x7ffd_0000_0000,
        fp: 0,
    };
    let mut out = [0u64; 8];
    assert_eq!(walk(&mut mem, regs, USER_END, &mut out), (1, Stop::End));
    assert_eq!(out[0], 0x40_1000);
    assert_eq!(mem.1, 0, "nothing read");
    // A kernel or null IP is not a user stack at all.
    let regs = UserRegs {
        ip: 0,
        sp: 0,
        fp: 0,
    };
    assert_eq!(walk(&mut mem, regs, USER_END, &mut out), (0, Stop::Invalid));
}

#[test]
fn random_memory_never_loops_or_overflows() {
    // Garbage stacks: the walk must terminate within the output size and never panic.
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..2000 {
        let sp = 0x7ffd_0000_0000u64;
        let mut mem = Mem::default();
        for i in 0..64u64 {
            let v = match rnd() % 4 {
                0 => (sp + (rnd() % 0x400)) & !7,
                1 => rnd(),
                2 => 0,
                _ => sp + i * 8 + 8,
            };
            mem.0.insert(sp + i * 8, v);
        }
        let regs = UserRegs {
            ip: rnd() % USER_END + 1,
            sp,
            fp: sp + (rnd() % 0x200),
        };
        let mut out = [0u64; 32];
        let mut win_out = [0u64; 32];
        let w = walk(&mut windowed(&mem), regs, USER_END, &mut win_out);
        let (n, stop) = walk(&mut mem, regs, USER_END, &mut out);
        assert!(n <= out.len());
        assert!(mem.1 <= out.len());
        assert_eq!(w, (n, stop), "windowed and direct reads walk alike");
        assert_eq!(win_out, out);
    }
}
