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

/// The bounds of a frame record and of a return address, exactly at their edges, through
/// both readers: a record at the stack pointer and the last one that ends inside user
/// space are walked, one a word beyond either is not; a return address one below the end
/// of user space is kept, one at it is not, and 0 ends the chain.
#[test]
fn bounds_are_exact_at_their_edges() {
    let walk_both = |regs: UserRegs, words: &[(u64, u64)], user_end: u64| {
        let mut mem = Mem::default();
        mem.0.extend(words.iter().copied());
        let mut out = [0u64; 8];
        let mut win_out = [0u64; 8];
        let w = walk(&mut windowed(&mem), regs, user_end, &mut win_out);
        let d = walk(&mut mem, regs, user_end, &mut out);
        assert_eq!(w, d, "windowed and direct reads walk alike");
        assert_eq!(win_out, out);
        (d, out)
    };
    let ip = 0x40_1000;
    let sp = 0x7ffd_0000_0000u64;
    let ret = 0x40_2000;
    // A record at the stack pointer itself, then one a word below it.
    let at_sp = UserRegs { ip, sp, fp: sp };
    assert_eq!(
        walk_both(at_sp, &[(sp, 0), (sp + 8, ret)], USER_END).0,
        (2, Stop::End)
    );
    let below = UserRegs {
        fp: sp - 8,
        ..at_sp
    };
    assert_eq!(
        walk_both(below, &[(sp - 8, 0), (sp, ret)], USER_END).0,
        (1, Stop::Invalid)
    );
    // The last record that ends inside user space, at user_end - 24 (aligned), and the
    // first past it, at user_end - 16.
    let last = USER_END - 24;
    let regs = UserRegs { fp: last, ..at_sp };
    assert_eq!(
        walk_both(regs, &[(last, 0), (last + 8, ret)], USER_END).0,
        (2, Stop::End)
    );
    let past = USER_END - 16;
    let regs = UserRegs { fp: past, ..at_sp };
    assert_eq!(
        walk_both(regs, &[(past, 0), (past + 8, ret)], USER_END).0,
        (1, Stop::Invalid)
    );
    // A stack pointer above every record that could be valid: nothing is.
    let regs = UserRegs {
        ip,
        sp: USER_END - 8,
        fp: USER_END - 8,
    };
    assert_eq!(
        walk_both(regs, &[(USER_END - 8, 0)], USER_END).0,
        (1, Stop::Invalid)
    );
    // Return addresses: user_end - 1 is kept, user_end is not, 0 ends the chain.
    let (got, out) = walk_both(at_sp, &[(sp, 0), (sp + 8, USER_END - 1)], USER_END);
    assert_eq!(got, (2, Stop::End));
    assert_eq!(out[1], USER_END - 1);
    assert_eq!(
        walk_both(at_sp, &[(sp, 0), (sp + 8, USER_END)], USER_END).0,
        (1, Stop::Invalid)
    );
    assert_eq!(
        walk_both(at_sp, &[(sp, sp + 16), (sp + 8, 0)], USER_END).0,
        (1, Stop::End)
    );
    // A zero frame pointer ends the chain without a read, whatever the stack pointer.
    for sp in [0, 8, sp] {
        let regs = UserRegs { ip, sp, fp: 0 };
        assert_eq!(
            walk_both(regs, &[(0, 16), (8, ret)], USER_END).0,
            (1, Stop::End)
        );
    }
    // A user space smaller than a frame record has room for none (and does not overflow).
    let tiny = UserRegs {
        ip: 8,
        sp: 0,
        fp: 8,
    };
    assert_eq!(
        walk_both(tiny, &[(8, 0), (16, 9)], 16).0,
        (1, Stop::Invalid)
    );
}

/// A window holds exactly the records it read: `held_frame` answers for the aligned
/// addresses from the last read's address up to the one whose record ends at the window's
/// end, with the words `read_frame` gives, and for nothing else (unaligned, below, above,
/// far away in either direction, wrapping).
#[test]
fn a_window_holds_exactly_the_records_it_read() {
    let sp = 0x7ffd_0000_1000u64;
    let mut mem = Mem::default();
    for i in 0..(2 * WINDOW_WORDS as u64) {
        mem.0.insert(sp + 8 * i, 0x1000 + i);
    }
    let mut w = windowed(&mem);
    assert_eq!(w.held_frame(sp), None, "nothing before the first read");
    let fp = sp + 8;
    assert_eq!(w.read_frame(fp), Some([0x1001, 0x1002]));
    let held = |w: &Windowed<Words>, a: u64| w.held_frame(a);
    for k in 0..(WINDOW_WORDS as u64 - 1) {
        let a = fp + 8 * k;
        assert_eq!(held(&w, a), Some([0x1001 + k, 0x1002 + k]), "record {k}");
    }
    for a in [
        fp + 8 * (WINDOW_WORDS as u64 - 1),
        fp + 8 * WINDOW_WORDS as u64,
        fp - 8,
        fp + 1,
        fp + 4,
        fp + 8 * 3 + 7,
        fp.wrapping_sub(1 << 61),
        fp.wrapping_add(1 << 61),
        fp.wrapping_add(1 << 63),
        0,
        u64::MAX,
    ] {
        assert_eq!(held(&w, a), None, "{a:#x} is not held");
    }
    // A short window (a record that straddles the end of what can be read) holds less.
    let mut short = Mem::default();
    short.0.insert(sp, 1);
    short.0.insert(sp + 8, 2);
    short.0.insert(sp + 16, 3);
    let mut w = windowed(&short);
    assert_eq!(w.read_frame(sp), Some([1, 2]));
    assert_eq!(w.held_frame(sp + 8), Some([2, 3]));
    assert_eq!(w.held_frame(sp + 16), None);
    // An unaligned read is refused and leaves nothing held there.
    assert_eq!(w.read_frame(sp + 4), None);
    assert_eq!(w.held_frame(sp + 4), None);
}

/// A window that starts below the stack's top reads no further than it (the arguments and
/// environment above it are never a frame record), the same walk; without a top the last
/// window reads past it. A record that straddles the top is read whole; one above it reads
/// ahead as without a top.
#[test]
fn windowed_reads_stop_at_the_stack_top() {
    let (mem, regs, expected) = chain(20);
    let last_fp = regs.fp + 0x30 * 19;
    let top = last_fp + 16 + 8;
    let reads_end = |calls: &[(u64, usize)]| {
        calls
            .iter()
            .map(|&(addr, words)| addr + 8 * words as u64)
            .max()
            .unwrap()
    };
    let mut out = [0u64; 64];
    let mut win = windowed(&mem);
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (21, Stop::End));
    assert!(
        reads_end(&win.reader().1) > top,
        "no read-ahead past the top to cut"
    );
    let mut win = windowed(&mem);
    win.begin(top);
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (21, Stop::End));
    assert_eq!(&out[..21], &expected[..]);
    assert_eq!(reads_end(&win.reader().1), top);
    // The top inside the last record (8 bytes into it): the window reads the record
    // whole, nothing past it.
    let mut win = windowed(&mem);
    win.begin(last_fp + 8);
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (21, Stop::End));
    assert_eq!(&out[..21], &expected[..]);
    assert_eq!(reads_end(&win.reader().1), last_fp + 16);
    // The top below the last records: a window from one above it reads ahead as usual.
    let mut win = windowed(&mem);
    let low = last_fp - 0x30 * 8;
    win.begin(low);
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (21, Stop::End));
    assert_eq!(&out[..21], &expected[..]);
    for &(addr, words) in &win.reader().1 {
        if addr < low {
            assert!(
                addr + 8 * words as u64 <= low.max(addr + 16),
                "{addr:#x}+{words}"
            );
        } else {
            assert_eq!(words, WINDOW_WORDS, "{addr:#x}");
        }
    }
    // A walk that begins again without a top reads past it again.
    win.begin(u64::MAX);
    assert_eq!(walk(&mut win, regs, USER_END, &mut out), (21, Stop::End));
    assert!(reads_end(&win.reader().1) > top);
}
