package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
)

// output writes the commands' results, for people or as JSON.
type output struct {
	w    io.Writer
	json bool
	// now is when the command started: instants are shown relative to it.
	now time.Time
}

// inspection writes what inspect shows of one name:
//
//	orders:42: lock, lease 27.4s left, fencing token 1042, 1 subscription
//	  held by 3f2a...:17 x2  api-7 pid 4121 (orders-svc, lockwarden 0.1.0, up since 12:03:55)
func (o *output) inspection(in coordinator.Inspection) {
	fmt.Fprintf(o.w, "%s: %s\n", in.Name, o.headline(in))
	o.holders(in)
	for i, w := range in.Queue {
		deadline := "no deadline"
		if !w.Deadline.IsZero() {
			deadline = "gives up " + o.relative(w.Deadline)
		}
		fmt.Fprintf(o.w, "  waiter %d: %s  %s\n    %s\n", i+1, w.Owner, deadline, o.process(w.Process))
	}
	for _, p := range in.Permits {
		expires := "no lease"
		if !p.Expires.IsZero() {
			expires = "expires " + o.relative(p.Expires)
		}
		fmt.Fprintf(o.w, "  permit %s  %s\n", p.ID, expires)
	}
	if in.WriteIntent != "" {
		fmt.Fprintf(o.w, "  writer waiting for the readers to leave: %s\n", in.WriteIntent)
	}
	if in.Truncated {
		fmt.Fprintf(o.w, "  (lists cut at %d entries)\n", coordinator.InspectLimit)
	}
}

// headline is the first line's summary of in.
func (o *output) headline(in coordinator.Inspection) string {
	var parts []string
	switch in.Kind {
	case coordinator.ObjectNone:
		parts = append(parts, "not held")
	case coordinator.ObjectReadWriteLock:
		parts = append(parts, fmt.Sprintf("%s, %s mode", in.Kind, in.Mode))
	case coordinator.ObjectSemaphore, coordinator.ObjectCounter:
		parts = append(parts, fmt.Sprintf("%s, %d", in.Kind, in.Count))
	case coordinator.ObjectLatch:
		parts = append(parts, fmt.Sprintf("%s, count %d", in.Kind, in.Count))
	case coordinator.ObjectPermitSemaphore:
		parts = append(parts, fmt.Sprintf("%s, %d available, %d acquired", in.Kind, in.Count, in.AcquiredPermits))
	case coordinator.ObjectOther:
		parts = append(parts, fmt.Sprintf("not a lock, semaphore or latch (a Redis %s)", in.RedisType))
	default:
		parts = append(parts, in.Kind.String())
	}
	switch {
	case in.NoExpiry:
		parts = append(parts, "no expiry")
	case in.Lease > 0:
		parts = append(parts, "lease "+round(in.Lease)+" left")
	}
	if in.Token != 0 {
		parts = append(parts, fmt.Sprintf("fencing token %d", in.Token))
	}
	switch in.Subscribers {
	case 0:
	case 1:
		parts = append(parts, "1 subscription to its channels")
	default:
		parts = append(parts, fmt.Sprintf("%d subscriptions to its channels", in.Subscribers))
	}
	return strings.Join(parts, ", ")
}

// holders writes one line per holder of in.
func (o *output) holders(in coordinator.Inspection) {
	for _, h := range in.Holders {
		mode := ""
		if h.Mode != "" {
			mode = h.Mode + " "
		}
		lease := ""
		if h.Lease > 0 {
			lease = "  lease " + round(h.Lease) + " left"
		}
		since := ""
		if !h.HeldSince.IsZero() {
			since = "  since " + o.clock(h.HeldSince) + " (" + round(o.now.Sub(h.HeldSince)) + ")"
		}
		fmt.Fprintf(o.w, "  %sheld by %s x%d%s%s\n    %s\n", mode, h.Owner, h.Count, since, lease, o.process(h.Process))
	}
}

// holdersSummary names in's holders in a few words, for the force-unlock question.
func (o *output) holdersSummary(in coordinator.Inspection) string {
	if len(in.Holders) == 0 {
		return "no holder"
	}
	var names []string
	for _, h := range in.Holders {
		names = append(names, h.Owner+" "+o.process(h.Process))
	}
	return "held by " + strings.Join(names, "; ")
}

// process describes the process of an owner.
func (o *output) process(p *coordinator.Process) string {
	if p == nil {
		return "process unknown: not a registered lockwarden process (Redisson or another client)"
	}
	return fmt.Sprintf("process %s pid %d (%s, lockwarden %s, up since %s)", p.Host, p.PID, p.Program, p.Version, o.clock(p.Started))
}

// listing writes list's table.
func (o *output) listing(all []coordinator.Inspection) {
	if len(all) == 0 {
		fmt.Fprintln(o.w, "no names match")
		return
	}
	tw := tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tHOLDERS\tWAITERS\tLEASE\tTOKEN")
	for _, in := range all {
		lease := "-"
		switch {
		case in.NoExpiry:
			lease = "none"
		case in.Lease > 0:
			lease = round(in.Lease)
		}
		token := "-"
		if in.Token != 0 {
			token = fmt.Sprint(in.Token)
		}
		holders := fmt.Sprint(len(in.Holders))
		switch in.Kind {
		case coordinator.ObjectSemaphore, coordinator.ObjectCounter, coordinator.ObjectLatch:
			holders = "-"
		case coordinator.ObjectPermitSemaphore:
			holders = fmt.Sprintf("%d permits", in.AcquiredPermits)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", in.Name, in.Kind, holders, len(in.Queue), lease, token)
	}
	_ = tw.Flush()
}

// processes writes the processes table.
func (o *output) processes(list []coordinator.Process) {
	if len(list) == 0 {
		fmt.Fprintln(o.w, "no lockwarden process is registered")
		return
	}
	tw := tabwriter.NewWriter(o.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COORDINATOR\tHOST\tPID\tPROGRAM\tVERSION\tSTARTED")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", p.ID, p.Host, p.PID, p.Program, p.Version, o.clock(p.Started))
	}
	_ = tw.Flush()
}

// event writes one journal event on one line.
func (o *output) event(ev messages.Event) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-14s %s", ev.Time.Local().Format("15:04:05.000"), ev.Type, ev.Name)
	if ev.Kind != "" {
		fmt.Fprintf(&b, " (%s)", ev.Kind)
	}
	if ev.Owner != "" {
		fmt.Fprintf(&b, "  owner %s", ev.Owner)
	}
	if ev.From != "" {
		fmt.Fprintf(&b, "  from %s", ev.From)
	}
	if ev.Token != 0 {
		fmt.Fprintf(&b, "  token %d", ev.Token)
	}
	if ev.Wait >= time.Millisecond {
		fmt.Fprintf(&b, "  waited %s", round(ev.Wait))
	}
	if ev.Held >= time.Millisecond {
		fmt.Fprintf(&b, "  held %s", round(ev.Held))
	}
	if ev.Reason != "" {
		fmt.Fprintf(&b, "  (%s)", ev.Reason)
	}
	fmt.Fprintln(o.w, b.String())
}

// relative says when t is, from now: "in 4m59s" or "1.2s ago".
func (o *output) relative(t time.Time) string {
	if d := t.Sub(o.now); d >= 0 {
		return "in " + round(d)
	}
	return round(o.now.Sub(t)) + " ago"
}

// clock writes t as a local time of day, with the date when it is not today.
func (o *output) clock(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	t = t.Local()
	if y, m, d := t.Date(); y == o.now.Year() && m == o.now.Month() && d == o.now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// round rounds d for reading: to 0.1 s above a second, to the millisecond below.
func round(d time.Duration) string {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}
