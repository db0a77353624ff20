//! Loom: the state table's claims, leases and recycling. A claim of an env
//! is exclusive (of two racing claims exactly one wins while it is held, a
//! failed claim leaves no bit behind, and the env is claimable again once the
//! winner drops), a claimant sees all of the previous claimant's slot-state
//! writes, and releasing and recycling never hand one slot to two leases nor
//! let a new lease see the old lease's state. Every slot-state access goes
//! through the table's loom `UnsafeCell`, so an access not ordered after the
//! previous one is reported as a causality violation (a data race).
use std::sync::Arc;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Notify;
use loom::thread;

use crate::infer::state_table::{EnvBusy, EnvSlot, SlotLease, StateTable, StepClaim};

/// Claims `envs` on another thread and writes `id` into the first one's
/// state; the claim, if won, comes back held.
fn claim_on_thread(
    lease: &Arc<SlotLease>,
    envs: &'static [u32],
    id: u64,
) -> thread::JoinHandle<Result<StepClaim, EnvBusy>> {
    let lease = Arc::clone(lease);
    thread::spawn(move || {
        let mut claim = lease.claim(envs)?;
        claim.slot_state(envs[0]).run_id = Some(id);
        Ok(claim)
    })
}

#[test]
fn racing_claims_one_wins_and_the_env_is_claimable_again() {
    loom::model(|| {
        let table = StateTable::new(1, 1);
        let lease = table.lease(1).expect("one free slot");
        let a = claim_on_thread(&lease, &[0], 1);
        let b = claim_on_thread(&lease, &[0], 2);
        let (a, b) = (a.join().expect("a"), b.join().expect("b"));
        let (winner, busy, id) = match (a, b) {
            (Ok(claim), Err(busy)) => (claim, busy, 1),
            (Err(busy), Ok(claim)) => (claim, busy, 2),
            (Ok(_), Ok(_)) => panic!("two claims of env 0 held at once"),
            (Err(_), Err(_)) => panic!("neither claim of env 0 won"),
        };
        assert_eq!(
            busy,
            EnvBusy {
                position: 0,
                index: 0
            }
        );
        assert!(lease.claim(&[0]).is_err(), "a held claim keeps env 0 busy");
        drop(winner);
        let mut again = lease.claim(&[0]).expect("claimable after the drop");
        assert_eq!(again.slot_state(0).run_id, Some(id));
    });
}

#[test]
fn a_claim_sees_the_previous_claims_writes() {
    loom::model(|| {
        let table = StateTable::new(1, 1);
        let lease = table.lease(1).expect("one free slot");
        let other = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || {
                if let Ok(mut claim) = lease.claim(&[0]) {
                    let state = claim.slot_state(0);
                    state.run_id = Some(1);
                    state.recurrent[0] = 1.0;
                }
            })
        };
        // No join before this claim: only the claim bit orders the two
        // claimants' accesses (the `UnsafeCell` checks it).
        if let Ok(mut claim) = lease.claim(&[0]) {
            let state = claim.slot_state(0);
            match state.run_id {
                None => assert_eq!(state.recurrent[0], 0.0),
                Some(1) => assert_eq!(state.recurrent[0], 1.0, "torn slot state"),
                other => panic!("unexpected run id {other:?}"),
            }
            state.run_id = Some(2);
        }
        other.join().expect("other");
    });
}

#[test]
fn a_failed_multi_word_claim_leaves_no_bit_behind() {
    let mut builder = super::builder(None);
    // Leasing 65 slots (so that env 64 is in a second word) takes many
    // steps before the threads start.
    builder.max_branches = 10_000;
    builder.check(|| {
        let table = StateTable::new(65, 0);
        let lease = table.lease(65).expect("65 free slots");
        // The two claims set their words in opposite orders.
        let a = claim_on_thread(&lease, &[0, 64], 1);
        let b = claim_on_thread(&lease, &[64, 0], 2);
        let (a, b) = (a.join().expect("a"), b.join().expect("b"));
        assert!(
            !(a.is_ok() && b.is_ok()),
            "two claims of envs 0 and 64 held at once"
        );
        drop((a, b));
        let both = lease.claim(&[0, 64]).expect("no bit left behind");
        drop(both);
    });
}

/// A lease's claim is answered (and dropped) on an inference thread while the
/// stream drops the lease and the recycler recycles it; a second stream
/// leases at the same time. The one slot is never held by two leases, is
/// never lost, and a new lease sees it reset.
#[test]
fn release_and_recycle_never_hand_a_slot_to_two_leases() {
    loom::model(|| {
        let table = StateTable::new(1, 1);
        let released = Arc::new(Notify::new());
        {
            let released = Arc::clone(&released);
            table.set_release_hook(Box::new(move || released.notify()));
        }
        let first = table.lease(1).expect("one free slot");
        let mut claim = first.claim(&[0]).expect("env 0 free");
        // Which of the stream and the claim drops the lease last is decided
        // by std's `Arc` refcount, which loom cannot see, so it would not
        // explore the stream dropping last. This Relaxed flag (no
        // happens-before) makes the two drops' order visible to it.
        let answered = Arc::new(AtomicBool::new(false));
        let inference = {
            let answered = Arc::clone(&answered);
            thread::spawn(move || {
                claim.slot_state(0).run_id = Some(1);
                drop(claim);
                answered.store(true, Ordering::Relaxed);
            })
        };
        let second = {
            let table = Arc::clone(&table);
            thread::spawn(move || {
                let lease = table.lease(1).ok()?;
                let mut claim = lease.claim(&[0]).expect("a new lease's env is free");
                let state = claim.slot_state(0);
                assert_eq!(state.run_id, None, "a new lease saw the old state");
                state.run_id = Some(2);
                drop(claim);
                Some(lease)
            })
        };
        // The stream ends; whichever of it and the claim is last releases
        // the lease. Then the recycler (an inference thread's job) runs.
        let _ = answered.load(Ordering::Relaxed);
        drop(first);
        // loom's `Notify` may wake spuriously: wait until a lease is queued.
        let r = loop {
            released.wait();
            if let Some(r) = table.take_released() {
                break r;
            }
        };
        assert_eq!(&*r.slots, &[EnvSlot(0)]);
        table.recycle(r);
        inference.join().expect("inference");
        let second = second.join().expect("second stream");
        match (&second, table.lease(1)) {
            (Some(_), Ok(_)) => panic!("slot 0 leased twice"),
            (None, Err(_)) => panic!("slot 0 lost"),
            _ => {}
        }
    });
}
