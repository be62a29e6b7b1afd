package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The report on a violation of the fault suite: what the witness's log says of the holds around it,
// and which faults were injected then, so that a failing soak can be read without running it again.

// fsLog is the witness's log, by lock name, in the order the witness wrote it.
type fsLog struct {
	byName map[string][]fsLogEntry
	unlock map[string]fsLogEntry // by hold
}

func (r *fsRun) readLog() *fsLog {
	l := &fsLog{byName: make(map[string][]fsLogEntry), unlock: make(map[string]fsLogEntry)}
	raw, err := r.wc.LRange(r.t.Context(), fsLogKey(r.prefix), 0, -1).Result()
	if err != nil {
		r.t.Logf("witness LRANGE log: %v", err)
		return l
	}
	for _, js := range raw {
		var e fsLogEntry
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			r.t.Logf("witness log entry %s: %v", js, err)
			continue
		}
		if e.Ev == "unlock" {
			l.unlock[e.Hold] = e
			continue
		}
		l.byName[e.Name] = append(l.byName[e.Name], e)
	}
	return l
}

// fsSpanOf is one hold as the log saw it: its entry and leave (nil if it never left).
type fsSpanOf struct {
	in, out *fsLogEntry
}

// holds returns the holds of name in the log, by id.
func (l *fsLog) holds(name string) map[string]*fsSpanOf {
	m := make(map[string]*fsSpanOf)
	for i := range l.byName[name] {
		e := &l.byName[name][i]
		h := m[e.Hold]
		if h == nil {
			h = &fsSpanOf{}
			m[e.Hold] = h
		}
		if e.Ev == "in" {
			h.in = e
		} else {
			h.out = e
		}
	}
	return m
}

// explain describes the holds of name that were inside at some time in [from, to] (witness ms), the
// data losses and faults around it; mark flags the holds of interest.
func (r *fsRun) explain(l *fsLog, name string, from, to int64, allowed map[string]bool, mark ...string) string {
	var b strings.Builder
	holds := l.holds(name)
	type row struct {
		id string
		h  *fsSpanOf
	}
	var rows []row
	for id, h := range holds {
		if h.in == nil {
			continue
		}
		end := int64(1 << 62)
		if h.out != nil {
			end = h.out.T
		}
		if h.in.T <= to && end >= from {
			rows = append(rows, row{id, h})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return int(a.h.in.T - b.h.in.T) })
	if len(rows) > 40 {
		// The holds of interest and their neighbours, not every hold of a long window.
		keep := make([]row, 0, 40)
		for i, rw := range rows {
			near := false
			for j := max(i-3, 0); j <= min(i+3, len(rows)-1); j++ {
				near = near || slices.Contains(mark, rows[j].id)
			}
			if near || i < 3 || i >= len(rows)-3 {
				keep = append(keep, rw)
			}
		}
		fmt.Fprintf(&b, "      (%d holds in the window; those near the holds in question)\n", len(rows))
		rows = keep
	}
	for _, rw := range rows {
		h := rw.h
		tag := "  "
		if slices.Contains(mark, rw.id) {
			tag = "=>"
		}
		fmt.Fprintf(&b, "      %s %-14s %s token %s acq %d in %d (c=%s)", tag, rw.id, h.in.Mode, h.in.Token, h.in.Acq, h.in.T, cval(h.in.C))
		if h.out != nil {
			fmt.Fprintf(&b, " out %d (c=%s) done %d", h.out.T, cval(h.out.C), h.out.Done)
		} else {
			fmt.Fprintf(&b, " never left")
		}
		if u, ok := l.unlock[rw.id]; ok {
			fmt.Fprintf(&b, " unlock %q at %d", u.Unlock, u.T)
			if u.Done != 0 && (h.out == nil || u.Done != h.out.Done) {
				fmt.Fprintf(&b, " (done %d)", u.Done)
			}
		}
		child, _, _ := strings.Cut(rw.id, "/")
		if r.killed[child] {
			fmt.Fprintf(&b, " [child killed]")
		}
		if r.deadHolds[rw.id] {
			fmt.Fprintf(&b, " [inside at its child's kill]")
		}
		if allowed[rw.id] {
			fmt.Fprintf(&b, " [in an allowed overlap]")
		}
		b.WriteString("\n")
	}
	for _, f := range r.timeline {
		if f.end >= from-5000 && f.start <= to+1000 {
			fmt.Fprintf(&b, "      fault %q from %d to %d\n", f.name, f.start, f.end)
		}
	}
	for _, loss := range r.losses {
		if loss >= from-5000 && loss <= to+1000 {
			fmt.Fprintf(&b, "      data loss at %d\n", loss)
		}
	}
	return b.String()
}

func cval(c *int64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprint(*c)
}

// explainLostUpdate describes the holds around a lost update of hold.
func (r *fsRun) explainLostUpdate(l *fsLog, name, hold string, allowed map[string]bool) string {
	h := l.holds(name)[hold]
	if h == nil || h.in == nil || h.out == nil {
		return "      (not in the log)\n"
	}
	return r.explain(l, name, h.in.T, h.out.T, allowed, hold)
}

// explainRegression describes the holds around a token regression: the entrant and the holds that got
// the token it did not exceed.
func (r *fsRun) explainRegression(l *fsLog, name, hold, maxHold, maxToken string, allowed map[string]bool) string {
	holds := l.holds(name)
	h := holds[hold]
	if h == nil || h.in == nil {
		return "      (not in the log)\n"
	}
	mark := []string{hold}
	from := h.in.T
	for id, o := range holds {
		if o.in != nil && (o.in.Token == maxToken || id == maxHold) && id != hold {
			mark = append(mark, id)
			from = min(from, o.in.T)
		}
	}
	return r.explain(l, name, from, h.in.T, allowed, mark...)
}
