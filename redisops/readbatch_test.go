package redisops_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/redisops"
)

// readCall is one read acquire or read release of a batch, as the caller makes it.
type readCall struct {
	release bool
	owner   string
	lease   time.Duration
	held    int64 // the owner's count as the caller knows it, or UnknownHoldCount
	seq     int   // a release's number: its request id is "req:r<seq>", or "unsequenced-<seq>" with held unknown
}

func (c readCall) requestID() string {
	if c.held == redisops.UnknownHoldCount {
		return "unsequenced-" + strconv.Itoa(c.seq)
	}
	return "req:r" + strconv.Itoa(c.seq)
}

// readAnswer is a call's answer, in a form that two runs can compare.
type readAnswer string

func answerOf(a redisops.Acquired, r redisops.Released, err error, release bool) readAnswer {
	switch {
	case err != nil:
		for _, sentinel := range []error{redisops.ErrNotHeld, redisops.ErrStaleRelease, redisops.ErrWrongType} {
			if errors.Is(err, sentinel) {
				return readAnswer("error: " + sentinel.Error())
			}
		}
		return readAnswer("error: " + err.Error())
	case release:
		return readAnswer(fmt.Sprintf("released, %d left", r.Remaining))
	case a.OK:
		return readAnswer(fmt.Sprintf("held %d", a.HoldCount))
	case a.TTL > 0:
		return "refused"
	}
	return readAnswer(fmt.Sprintf("refused with ttl %v", a.TTL))
}

// runBatch runs calls on name as one Batch.
func runBatch(t *testing.T, ops *redisops.Ops, name string, calls []readCall) []readAnswer {
	t.Helper()
	n := redisops.RWNamesOf(name)
	b := ops.NewBatch()
	replies := make([]func() readAnswer, len(calls))
	for i, c := range calls {
		if c.release {
			reply := b.ReadRelease(n, c.owner, c.requestID(), c.held)
			replies[i] = func() readAnswer {
				r, err := reply()
				return answerOf(redisops.Acquired{}, r, err, true)
			}
		} else {
			reply := b.ReadAcquire(n, c.owner, c.lease, c.held)
			replies[i] = func() readAnswer {
				a, err := reply()
				return answerOf(a, redisops.Released{}, err, false)
			}
		}
	}
	b.Exec(t.Context())
	answers := make([]readAnswer, len(calls))
	for i, reply := range replies {
		answers[i] = reply()
	}
	return answers
}

// runAlone runs calls on name one by one, each with its own script.
func runAlone(t *testing.T, ops *redisops.Ops, name string, calls []readCall) []readAnswer {
	t.Helper()
	ctx := t.Context()
	answers := make([]readAnswer, len(calls))
	for i, c := range calls {
		if c.release {
			r, err := ops.ReadReleaseHeld(ctx, name, c.owner, c.requestID(), c.lease, c.held)
			answers[i] = answerOf(redisops.Acquired{}, r, err, true)
		} else {
			a, err := ops.ReadAcquire(ctx, name, c.owner, c.lease, c.held)
			answers[i] = answerOf(a, redisops.Released{}, err, false)
		}
	}
	return answers
}

// readState is what a read-write lock's keys hold, with the lock's name taken out, so that the states
// of two locks can be compared.
type readState struct {
	exists  bool
	fields  map[string]string
	holds   map[string]bool   // owner:k for every timeout key 1..count of each owner
	latches map[string]string // owner -> its latch
	ttl     time.Duration
	holdTTL map[string]time.Duration // the holds' PTTLs, shown on a failure, not compared
}

func stateOf(t *testing.T, c *redis.Client, name string, owners []string) readState {
	t.Helper()
	ctx := t.Context()
	s := readState{holds: map[string]bool{}, latches: map[string]string{}, holdTTL: map[string]time.Duration{}}
	var err error
	if s.fields, err = c.HGetAll(ctx, name).Result(); err != nil {
		t.Fatal(err)
	}
	s.exists = len(s.fields) > 0
	if s.ttl, err = c.PTTL(ctx, name).Result(); err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		count, _ := strconv.Atoi(s.fields[o])
		for k := 1; k <= count+1; k++ {
			n, err := c.Exists(ctx, redisops.ReadTimeoutKey(name, o, int64(k))).Result()
			if err != nil {
				t.Fatal(err)
			}
			s.holds[fmt.Sprintf("%s:%d", o, k)] = n == 1
			if n == 1 {
				s.holdTTL[fmt.Sprintf("%s:%d", o, k)] = c.PTTL(ctx, redisops.ReadTimeoutKey(name, o, int64(k))).Val()
			}
		}
		latch, err := c.Get(ctx, redisops.UnlockLatchKey(name, o)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		s.latches[o] = latch
	}
	return s
}

// TestReadBatchMatchesCallsAlone: the calls of a batch, which go to Redis as one rw_read_batch.lua
// call, get the answers they get when each runs alone with its own script, and leave the lock in the
// same state: the same fields, timeout keys and latches, and the same expiry (within the 50 ms the
// scripts allow a lock's expiry to be late, plus the time between the two runs). Random batches of
// acquires, re-entries and sequenced releases of several owners with several leases, with a writer's
// intent now and then, retries of a batch and late copies of an older one, run side by side on two
// locks of one server.
func TestReadBatchMatchesCallsAlone(t *testing.T) {
	ops, client := setup(t)
	ctx := t.Context()
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		batched, alone := fmt.Sprintf("rb:batched:%d", seed), fmt.Sprintf("rb:alone:%d", seed)
		owners := []string{"o1", "o2", "o3", "o4", "o5", "o6"}
		leases := []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}
		counts := map[string]int64{}
		seq := 0
		var history [][]readCall
		for round := range 250 {
			var calls []readCall
			switch r := rng.IntN(20); {
			case r == 0 && len(history) > 0:
				calls = history[len(history)-1] // a retry of the last batch
			case r == 1 && len(history) > 3:
				calls = history[len(history)-1-rng.IntN(3)] // a late copy of an older one
			case r == 2:
				// A writer's intent keeps new readers out, on both locks; then it is withdrawn.
				for _, name := range []string{batched, alone} {
					if _, err := ops.SetWriteIntent(ctx, name, "writer", time.Minute); err != nil {
						t.Fatal(err)
					}
				}
			case r == 3:
				for _, name := range []string{batched, alone} {
					if _, err := ops.ClearWriteIntent(ctx, name, "writer"); err != nil {
						t.Fatal(err)
					}
				}
			case r <= 5:
				// A hold runs out (its timeout key is deleted, as its expiry would), on both locks.
				o := owners[rng.IntN(len(owners))]
				if counts[o] > 0 {
					k := 1 + rng.Int64N(counts[o])
					for _, name := range []string{batched, alone} {
						if err := client.Del(ctx, redisops.ReadTimeoutKey(name, o, k)).Err(); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if calls == nil {
				picked := rng.Perm(len(owners))[:2+rng.IntN(len(owners)-1)]
				for _, i := range picked {
					o := owners[i]
					c := readCall{owner: o, lease: leases[rng.IntN(len(leases))], held: counts[o]}
					if counts[o] > 0 && rng.IntN(3) > 0 {
						seq++
						c.release, c.seq = true, seq
					}
					if rng.IntN(10) == 0 {
						c.held = redisops.UnknownHoldCount // an owner id that other processes may share
					}
					calls = append(calls, c)
				}
				if rng.IntN(15) == 0 {
					// An owner twice in one batch (a lock actor never sends that): its second call runs
					// after its first.
					c := calls[0]
					c.held = counts[c.owner] + 1
					if c.release {
						c.held = counts[c.owner] - 1
						seq++
						c.seq = seq
					}
					c.release = c.release && c.held > 0
					calls = append(calls, c)
				}
				history = append(history, calls)
			}
			got := runBatch(t, ops, batched, calls)
			want := runAlone(t, ops, alone, calls)
			for i := range calls {
				if got[i] != want[i] {
					t.Fatalf("seed %d round %d: call %d %+v of %+v answered %q in a batch, %q alone", seed, round, i, calls[i], calls, got[i], want[i])
				}
				var held int64
				if _, err := fmt.Sscanf(string(want[i]), "held %d", &held); err == nil {
					counts[calls[i].owner] = held
				} else if _, err := fmt.Sscanf(string(want[i]), "released, %d left", &held); err == nil {
					counts[calls[i].owner] = held
				}
			}
			b, a := stateOf(t, client, batched, owners), stateOf(t, client, alone, owners)
			if b.exists != a.exists || !maps.Equal(b.fields, a.fields) || !maps.Equal(b.holds, a.holds) || !maps.Equal(b.latches, a.latches) {
				t.Fatalf("seed %d round %d, after %+v:\nbatched %+v\nalone   %+v", seed, round, calls, b, a)
			}
			// The lock ends no sooner than its longest hold (10 ms for the time between the readings).
			// How much later it ends is not compared: a release alone picks readers at random
			// (HRANDFIELD) to find a hold that keeps the expiry, and one that finds its hold shorter
			// than the lock keeps the expiry that an earlier release left (late by up to 50 ms of a
			// hold that is gone), so two runs of the same calls can leave different expiries.
			// TestReadBatchShortensTheExpiry checks that a batch cuts it.
			for side, s := range map[string]readState{"batched": b, "alone": a} {
				if longest := slices.Max(append(slices.Collect(maps.Values(s.holdTTL)), 0)); s.exists && s.ttl+10*time.Millisecond < longest {
					t.Fatalf("seed %d round %d, after %+v: the lock %s ends in %v, before its longest hold (%v): %v", seed, round, calls, side, s.ttl, longest, s.holdTTL)
				}
			}
		}
	}
}

// TestReadBatchShortensTheExpiry: a batch that releases the longest read hold brings the lock's
// expiry down to the longest hold left (publishing the unlock message, so that a waiting writer learns
// it), and one that releases the last holds deletes the lock and publishes.
func TestReadBatchShortensTheExpiry(t *testing.T) {
	ops, client := setup(t)
	ctx := t.Context()
	const name = "rb:shortens"
	sub := client.Subscribe(ctx, redisops.RWChannelName(name))
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	notice := func(what string) {
		t.Helper()
		wait, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := sub.ReceiveMessage(wait); err != nil {
			t.Fatalf("%s: no unlock message: %v", what, err)
		}
	}
	runAlone(t, ops, name, []readCall{{owner: "a", lease: 20 * time.Second}, {owner: "b", lease: midLease}, {owner: "c", lease: midLease}})
	got := runBatch(t, ops, name, []readCall{{owner: "a", release: true, held: 1, seq: 1}, {owner: "d", lease: midLease}})
	if fmt.Sprint(got) != "[released, 0 left held 1]" {
		t.Fatalf("answers %v, want [released, 0 left held 1]", got)
	}
	if ttl := client.PTTL(ctx, name).Val(); ttl > midLease+50*time.Millisecond || ttl < midLease-time.Second {
		t.Errorf("after the longest hold's release the lock ends in %v, want about %v", ttl, midLease)
	}
	notice("expiry cut")
	got = runBatch(t, ops, name, []readCall{{owner: "b", release: true, held: 1, seq: 2},
		{owner: "c", release: true, held: 1, seq: 3}, {owner: "d", release: true, held: 1, seq: 4}})
	if fmt.Sprint(got) != "[released, 0 left released, 0 left released, 0 left]" {
		t.Fatalf("answers %v, want three releases of the last holds", got)
	}
	if n := client.Exists(ctx, name).Val(); n != 0 {
		t.Errorf("the lock still exists after its last holds were released")
	}
	notice("lock freed")
}

// TestReadBatchIsOneCall: a batch of read calls on one lock goes to Redis as one script command, not
// as a pipeline of one script per call.
func TestReadBatchIsOneCall(t *testing.T) {
	ops, client := setup(t)
	const name = "rb:one-call"
	for _, s := range redisops.RWScripts() {
		if err := s.Load(t.Context(), client).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first := runAlone(t, ops, name, []readCall{{owner: "a", lease: midLease}, {owner: "b", lease: midLease}})
	commands := &roundTrips{}
	client.AddHook(commands)
	got := runBatch(t, ops, name, []readCall{
		{owner: "a", release: true, held: 1, seq: 1},
		{owner: "b", lease: midLease, held: 1},
		{owner: "c", lease: midLease},
		{owner: "d", lease: midLease},
	})
	want := []readAnswer{"released, 0 left", "held 2", "held 1", "held 1"}
	if fmt.Sprint(first) != "[held 1 held 1]" || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers %v then %v, want [held 1 held 1] then %v", first, got, want)
	}
	if n := commands.commands.Load(); n != 1 {
		t.Errorf("the batch of 4 calls sent %d script commands, want 1", n)
	}
}

// TestReadBatchRefusesOneCall: a call of a batch that its own script would refuse (a hold key or a
// latch of another type than the lock keeps there) is refused with ErrWrongType and changes nothing of
// that key; the other calls of the batch take effect.
func TestReadBatchRefusesOneCall(t *testing.T) {
	ops, client := setup(t)
	ctx := t.Context()
	const name = "rb:refused"
	runAlone(t, ops, name, []readCall{{owner: "a", lease: midLease}, {owner: "b", lease: midLease}})
	holdKey := redisops.ReadTimeoutKey(name, "c", 1)
	if err := client.RPush(ctx, holdKey, "data").Err(); err != nil {
		t.Fatal(err)
	}
	got := runBatch(t, ops, name, []readCall{
		{owner: "a", release: true, held: 1, seq: 1},
		{owner: "c", lease: midLease},
		{owner: "d", lease: midLease},
	})
	want := fmt.Sprint([]readAnswer{"released, 0 left", readAnswer("error: " + redisops.ErrWrongType.Error()), "held 1"})
	if fmt.Sprint(got) != want {
		t.Errorf("answers with c's hold key a list: %v, want %v", got, want)
	}
	if typ := client.Type(ctx, holdKey).Val(); typ != "list" || client.HExists(ctx, name, "c").Val() {
		t.Errorf("c's hold key is a %s, and c has a field: %v; want the list untouched and no field", typ, client.HExists(ctx, name, "c").Val())
	}

	latch := redisops.UnlockLatchKey(name, "b")
	if err := client.RPush(ctx, latch, "data").Err(); err != nil {
		t.Fatal(err)
	}
	got = runBatch(t, ops, name, []readCall{
		{owner: "b", release: true, held: 1, seq: 2},
		{owner: "d", release: true, held: 1, seq: 3},
	})
	want = fmt.Sprint([]readAnswer{readAnswer("error: " + redisops.ErrWrongType.Error()), "released, 0 left"})
	if fmt.Sprint(got) != want {
		t.Errorf("answers with b's latch a list: %v, want %v", got, want)
	}
	if typ := client.Type(ctx, latch).Val(); typ != "list" || client.HGet(ctx, name, "b").Val() != "1" {
		t.Errorf("b's latch is a %s and b's count %q; want the list untouched and b still holding", typ, client.HGet(ctx, name, "b").Val())
	}
}

// TestReadBatchOddCount: a reader's count that is not a whole number of holds (not a state the
// scripts make) sends the batch's calls alone, where each gets its own script's answer, instead of
// failing them all.
func TestReadBatchOddCount(t *testing.T) {
	ops, client := setup(t)
	ctx := t.Context()
	var answers [2][]readAnswer
	for i, side := range []string{"batched", "alone"} {
		name := "rb:odd-count:" + side
		runAlone(t, ops, name, []readCall{{owner: "a", lease: midLease}})
		if err := client.HSet(ctx, name, "c", "x").Err(); err != nil {
			t.Fatal(err)
		}
		calls := []readCall{{owner: "a", release: true, held: 1, seq: 1}, {owner: "c", lease: midLease}, {owner: "d", lease: midLease}}
		if side == "batched" {
			answers[i] = runBatch(t, ops, name, calls)
		} else {
			answers[i] = runAlone(t, ops, name, calls)
		}
	}
	if fmt.Sprint(answers[0]) != fmt.Sprint(answers[1]) || answers[0][0] != "released, 0 left" || answers[0][2] != "held 1" {
		t.Errorf("answers batched %v, alone %v; want the same, with a's release and d's acquire taking effect", answers[0], answers[1])
	}
}
