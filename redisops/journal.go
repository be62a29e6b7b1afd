package redisops

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/messages"
)

// JournalEntry is one lock event read back from an event journal: a Redis Stream entry.
type JournalEntry struct {
	// ID is the stream entry's id, to resume reading after it.
	ID string
	// Event is the event the entry holds, every field read back as [AppendEvents] wrote it.
	Event messages.Event
}

// AppendEvents adds evs, in order, to the Redis Stream stream, one XADD each in one pipeline, trimming
// the stream to about maxLen entries (MAXLEN ~; 0 keeps everything). Each entry has the fields type,
// name, kind, owner, from, token, holds, queued ("1" or "0"), time (Unix nanoseconds, empty for the zero
// time), wait_ns, held_ns, reason and coordinator; ParseEvent reads every field of the event back.
func AppendEvents(ctx context.Context, client redis.Cmdable, stream string, maxLen int64, evs []messages.Event) error {
	if len(evs) == 0 {
		return nil
	}
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, ev := range evs {
			p.XAdd(ctx, &redis.XAddArgs{Stream: stream, MaxLen: maxLen, Approx: maxLen > 0, Values: eventFields(ev)})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lockwarden: append events to %q: %w", stream, err)
	}
	return nil
}

func eventFields(ev messages.Event) []string {
	queued, at := "0", ""
	if ev.Queued {
		queued = "1"
	}
	if !ev.Time.IsZero() {
		// UnixNano of the zero time is not defined: it is written as no time at all.
		at = strconv.FormatInt(ev.Time.UnixNano(), 10)
	}
	return []string{
		"type", ev.Type.String(),
		"name", ev.Name,
		"kind", string(ev.Kind),
		"owner", ev.Owner,
		"from", ev.From,
		"token", strconv.FormatInt(ev.Token, 10),
		"holds", strconv.FormatInt(ev.HoldCount, 10),
		"queued", queued,
		"time", at,
		"wait_ns", strconv.FormatInt(int64(ev.Wait), 10),
		"held_ns", strconv.FormatInt(int64(ev.Held), 10),
		"reason", ev.Reason,
		"coordinator", ev.Coordinator,
	}
}

// ParseEvent reads a lock event from a stream entry written by AppendEvents, as XREAD, XRANGE or
// XREADGROUP return it. It returns an error for an entry that is not a lock event.
func ParseEvent(msg redis.XMessage) (JournalEntry, error) {
	str := func(k string) string { s, _ := msg.Values[k].(string); return s }
	num := func(k string) (int64, error) {
		s := str(k)
		if s == "" {
			return 0, nil
		}
		return strconv.ParseInt(s, 10, 64)
	}
	typ, ok := messages.ParseEventType(str("type"))
	if !ok {
		return JournalEntry{}, fmt.Errorf("lockwarden: stream entry %s: unknown event type %q", msg.ID, str("type"))
	}
	ev := messages.Event{
		Type: typ, Name: str("name"), Kind: messages.LockKind(str("kind")), Owner: str("owner"), From: str("from"),
		Reason: str("reason"), Coordinator: str("coordinator"), Queued: str("queued") == "1",
	}
	var nums [5]int64
	for i, k := range []string{"token", "holds", "time", "wait_ns", "held_ns"} {
		n, err := num(k)
		if err != nil {
			return JournalEntry{}, fmt.Errorf("lockwarden: stream entry %s: field %s: %w", msg.ID, k, err)
		}
		nums[i] = n
	}
	ev.Token, ev.HoldCount = nums[0], nums[1]
	if str("time") != "" {
		ev.Time = time.Unix(0, nums[2])
	}
	ev.Wait, ev.Held = time.Duration(nums[3]), time.Duration(nums[4])
	return JournalEntry{ID: msg.ID, Event: ev}, nil
}

// ReadEvents reads up to count events of stream after the entry id after ("0" for the start, "$" for
// only new ones), waiting up to block for one to arrive when there is none (block 0 does not wait).
// It returns no entries and a nil error when block passes with nothing new.
func ReadEvents(ctx context.Context, client redis.Cmdable, stream, after string, count int64, block time.Duration) ([]JournalEntry, error) {
	if block <= 0 {
		block = -1 // go-redis: no BLOCK argument
	}
	res, err := client.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, after}, Count: count, Block: block}).Result()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lockwarden: read events of %q: %w", stream, err)
	}
	var out []JournalEntry
	for _, s := range res {
		for _, msg := range s.Messages {
			e, err := ParseEvent(msg)
			if err != nil {
				return out, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}
