package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

// run runs the command line args and returns the exit status: 0 done, 1 failed, 2 bad usage.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cfg config
	fs := newFlags(&cfg, stderr)
	positional, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(fs, stderr)
		return 0
	}
	if err == nil {
		err = dispatch(ctx, &cfg, positional, stdin, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "lockwarden: %v (lockwarden -h for help)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "lockwarden: %s\n", strings.TrimPrefix(oneLine(err), "lockwarden: "))
		return 1
	}
}

// oneLine returns err's message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// dispatch runs the command positional[0].
func dispatch(ctx context.Context, cfg *config, positional []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(positional) == 0 {
		return usagef("no command given")
	}
	cmd, args := positional[0], positional[1:]
	switch cmd {
	case "inspect":
		if len(args) == 0 {
			return usagef("inspect: give at least one NAME")
		}
	case "list":
		if len(args) > 1 {
			return usagef("list: give at most one PATTERN")
		}
	case "processes", "watch":
		if len(args) != 0 {
			return usagef("%s takes no arguments", cmd)
		}
	case "force-unlock":
		if len(args) != 1 {
			return usagef("force-unlock: give one NAME")
		}
	default:
		return usagef("unknown command %q", cmd)
	}
	if cmd == "inspect" || cmd == "force-unlock" {
		for _, name := range args {
			if name == "" {
				return usagef("%s: a NAME must not be empty", cmd)
			}
		}
	}
	if cfg.limit < 0 {
		return usagef("--limit must not be negative")
	}
	if cfg.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	client, err := cfg.client()
	if err != nil {
		return err
	}
	defer client.Close()
	if err := ping(ctx, cfg, client); err != nil {
		return err
	}
	// The tool only looks (and force-unlocks): it stays out of the process registry and telemetry.
	c, err := coordinator.New(client, coordinator.WithoutProcessRegistry(), coordinator.WithoutTelemetry(),
		coordinator.WithoutReplicaSync())
	if err != nil {
		return err
	}
	defer c.Close()
	out := &output{w: stdout, json: cfg.json, now: time.Now()}
	switch cmd {
	case "inspect":
		return inspect(ctx, cfg, c, out, args)
	case "list":
		pattern := "*"
		if len(args) == 1 {
			pattern = args[0]
		}
		return list(ctx, cfg, c, out, pattern)
	case "processes":
		return processes(ctx, cfg, c, out)
	case "watch":
		return watch(ctx, cfg, client, out)
	default:
		return forceUnlock(ctx, cfg, c, out, args[0], stdin, stderr)
	}
}

// ping checks that Redis answers, so that an unreachable server is one clear error.
func ping(ctx context.Context, cfg *config, client redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		where := cfg.addr
		if cfg.sentinel != "" {
			where = "master " + cfg.master + " at sentinels " + cfg.sentinel
		}
		return fmt.Errorf("cannot reach Redis at %s: %w", where, err)
	}
	return nil
}

func inspect(ctx context.Context, cfg *config, c *coordinator.Coordinator, out *output, names []string) error {
	var all []coordinator.Inspection
	for _, name := range names {
		in, err := inspectOne(ctx, cfg, c, name)
		if err != nil {
			return err
		}
		all = append(all, in)
	}
	if out.json {
		if len(all) == 1 {
			return out.writeJSON(all[0])
		}
		return out.writeJSON(all)
	}
	for i, in := range all {
		if i > 0 {
			fmt.Fprintln(out.w)
		}
		out.inspection(in)
	}
	return nil
}

func inspectOne(ctx context.Context, cfg *config, c *coordinator.Coordinator, name string) (coordinator.Inspection, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	return c.Inspect(ctx, name)
}

func list(ctx context.Context, cfg *config, c *coordinator.Coordinator, out *output, pattern string) error {
	lctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	names, err := c.List(lctx, pattern)
	cancel()
	truncated := errors.Is(err, coordinator.ErrListTruncated)
	if err != nil && !truncated {
		return err
	}
	all := make([]coordinator.Inspection, 0, len(names))
	for _, name := range names {
		in, err := inspectOne(ctx, cfg, c, name)
		if err != nil {
			return err
		}
		if in.Kind == coordinator.ObjectNone { // freed since it was listed
			continue
		}
		all = append(all, in)
	}
	if out.json {
		if err := out.writeJSON(all); err != nil {
			return err
		}
	} else {
		out.listing(all)
	}
	if truncated {
		return fmt.Errorf("more names match %q than the %d listed: narrow the pattern", pattern, len(names))
	}
	return nil
}

func processes(ctx context.Context, cfg *config, c *coordinator.Coordinator, out *output) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	list, err := c.RegisteredProcesses(ctx)
	if err != nil {
		return err
	}
	if out.json {
		return out.writeJSON(list)
	}
	out.processes(list)
	return nil
}

func watch(ctx context.Context, cfg *config, client redis.UniversalClient, out *output) error {
	after, seen := cfg.from, 0
	for {
		entries, err := coordinator.ReadJournal(ctx, client, cfg.stream, after, 100, time.Second)
		if ctx.Err() != nil {
			return nil // interrupted
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			after = e.ID
			if out.json {
				if err := out.writeJSONLine(journalJSON{ID: e.ID, Event: e.Event.JSON()}); err != nil {
					return err
				}
			} else {
				out.event(e.Event)
			}
			if seen++; cfg.limit > 0 && seen >= cfg.limit {
				return nil
			}
		}
	}
}

func forceUnlock(ctx context.Context, cfg *config, c *coordinator.Coordinator, out *output, name string, stdin io.Reader, stderr io.Writer) error {
	before, err := inspectOne(ctx, cfg, c, name)
	if err != nil {
		return err
	}
	var m *coordinator.Mutex
	switch before.Kind {
	case coordinator.ObjectNone:
		if out.json {
			return out.writeJSON(forceUnlockJSON{Name: name, Removed: false, Before: before})
		}
		fmt.Fprintf(out.w, "%s is not locked: nothing removed\n", name)
		return nil
	case coordinator.ObjectLock:
		m = c.Mutex(name)
	case coordinator.ObjectFairLock:
		m = c.FairMutex(name)
	case coordinator.ObjectReadWriteLock:
		if before.Mode == "read" {
			m = c.RWMutex(name).Read()
		} else {
			m = c.RWMutex(name).Write()
		}
	default:
		return fmt.Errorf("%s is a %s, not a lock: force-unlock frees locks only; nothing removed", name, before.Kind)
	}
	if !cfg.yes {
		fmt.Fprintf(stderr, "Force-unlock %s %s (%s)? Its holders lose it at once. [y/N] ", before.Kind, name, out.holdersSummary(before))
		ok, err := confirm(ctx, stdin)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("not confirmed: nothing removed")
		}
		// What the operator agreed to free is what the first inspection showed: if the lock changed
		// hands or kind while the question was asked, nothing is removed.
		now, err := inspectOne(ctx, cfg, c, name)
		if err != nil {
			return err
		}
		if !sameHolders(before, now) {
			return fmt.Errorf("%s changed while the question was asked (now: %s, %s): nothing removed; run force-unlock again",
				name, now.Kind, out.holdersSummary(now))
		}
	}
	uctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	removed, err := m.ForceUnlock(uctx)
	cancel()
	if err != nil {
		return err
	}
	if out.json {
		return out.writeJSON(forceUnlockJSON{Name: name, Removed: removed, Before: before})
	}
	if !removed {
		fmt.Fprintf(out.w, "%s was no longer held as it was shown (freed, or taken in another mode): nothing removed\n", name)
		return nil
	}
	fmt.Fprintf(out.w, "force-unlocked %s %s; removed:\n", before.Kind, name)
	out.holders(before)
	return nil
}

// confirm reads the answer to a question from stdin: true for y or yes. It gives up when ctx ends (an
// interrupt), with an error.
func confirm(ctx context.Context, stdin io.Reader) (bool, error) {
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		answer <- line
	}()
	select {
	case line := <-answer:
		a := strings.ToLower(strings.TrimSpace(line))
		return a == "y" || a == "yes", nil
	case <-ctx.Done():
		return false, errors.New("interrupted: nothing removed")
	}
}

// sameHolders reports whether a and b show the same kind of lock with the same holders and counts.
func sameHolders(a, b coordinator.Inspection) bool {
	if a.Kind != b.Kind || a.Mode != b.Mode || len(a.Holders) != len(b.Holders) {
		return false
	}
	for i := range a.Holders {
		x, y := a.Holders[i], b.Holders[i]
		if x.Owner != y.Owner || x.Count != y.Count || x.Mode != y.Mode {
			return false
		}
	}
	return true
}

// forceUnlockJSON is force-unlock's JSON output.
type forceUnlockJSON struct {
	Name    string                 `json:"name"`
	Removed bool                   `json:"removed"`
	Before  coordinator.Inspection `json:"before"`
}

// journalJSON is one event of watch's JSON output.
type journalJSON struct {
	ID    string             `json:"id"`
	Event messages.EventJSON `json:"event"`
}

// writeJSON writes v as indented JSON.
func (o *output) writeJSON(v any) error {
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as JSON on one line.
func (o *output) writeJSONLine(v any) error { return json.NewEncoder(o.w).Encode(v) }
