// Command tracing shows lockwarden's OpenTelemetry spans. Under a parent span "checkout" it takes a
// lock, lets a second owner wait for it, releases it, and takes a MultiLock over locks on two Redis
// servers. The spans go through the OpenTelemetry SDK to the stdout exporter (one JSON object per
// span; -pretty indents them), and the program then prints them once more as a compact tree.
//
// It needs no setup: it starts two embedded Redis servers (redis-server if it is on PATH, else
// miniredis, whose clock follows real time).
//
//	go run ./examples/tracing
//	go run ./examples/tracing -pretty
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/internal/devredis"
)

func main() {
	pretty := flag.Bool("pretty", false, "indent the stdout exporter's JSON")
	flag.Parse()
	if err := run(*pretty); err != nil {
		log.Fatal(err)
	}
}

func run(pretty bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The SDK: spans go to the stdout exporter, in one batch when the program flushes at the end (so
	// that they do not interleave with its own output), and to an in-memory exporter for the tree.
	stdoutOpts := []stdouttrace.Option{stdouttrace.WithWriter(os.Stdout)}
	if pretty {
		stdoutOpts = append(stdoutOpts, stdouttrace.WithPrettyPrint())
	}
	stdout, err := stdouttrace.New(stdoutOpts...)
	if err != nil {
		return err
	}
	memory := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("tracing-example"))),
		sdktrace.WithBatcher(stdout, sdktrace.WithBatchTimeout(time.Minute)),
		sdktrace.WithSyncer(memory),
	)
	defer tp.Shutdown(context.Background())

	// Two servers with a coordinator each, and a second coordinator on the first server standing for
	// another process. Every coordinator gets the tracer provider.
	var coords []*coordinator.Coordinator
	for i := range 2 {
		srv, err := devredis.OpenEmbedded(ctx)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Printf("redis %d: %s\n", i+1, srv)
		for range 2 - i {
			c, err := coordinator.New(srv.Client(), coordinator.WithTracerProvider(tp), coordinator.WithLockNameAttribute(true))
			if err != nil {
				return err
			}
			defer c.Close()
			coords = append(coords, c)
		}
	}
	shop, otherProcess, warehouse := coords[0], coords[1], coords[2]

	ctx, checkout := tp.Tracer("tracing-example").Start(ctx, "checkout")

	// A lock, and a second owner in another process that waits for it.
	cart := shop.Mutex("cart:42")
	if err := cart.Lock(ctx); err != nil {
		return err
	}
	fmt.Printf("shop holds cart:42 (token %d)\n", cart.Token())
	waiter := otherProcess.Mutex("cart:42")
	waited := make(chan error, 1)
	go func() { waited <- waiter.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := cart.Unlock(ctx); err != nil {
		return err
	}
	if err := <-waited; err != nil {
		return err
	}
	fmt.Printf("the other process got cart:42 after the unlock (token %d)\n", waiter.Token())
	if err := waiter.Unlock(ctx); err != nil {
		return err
	}

	// A MultiLock over a lock on each server.
	stock := shop.MultiLock([]*coordinator.Mutex{shop.Mutex("stock:A"), warehouse.Mutex("stock:B")})
	if err := stock.Lock(ctx); err != nil {
		return err
	}
	fmt.Printf("shop holds stock:A and stock:B (tokens %v)\n", stock.Tokens())
	if err := stock.Unlock(ctx); err != nil {
		return err
	}
	checkout.End()

	// Spans of the lock actors' Redis calls may end a moment after the calls they serve return.
	time.Sleep(50 * time.Millisecond)
	fmt.Println("\nspans from the stdout exporter:")
	if err := tp.ForceFlush(ctx); err != nil {
		return err
	}
	fmt.Println("\nthe same spans as a tree:")
	printTree(memory.GetSpans())
	return nil
}

// printTree prints spans indented under their parents, each with its duration, the attributes that say
// what happened, and its events (·) with their offset from the span's start.
func printTree(spans tracetest.SpanStubs) {
	children := map[trace.SpanID][]tracetest.SpanStub{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if p := s.Parent.SpanID(); s.Parent.IsValid() && ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) }
	var walk func(s tracetest.SpanStub, depth int)
	walk = func(s tracetest.SpanStub, depth int) {
		var attrs []string
		for _, kv := range s.Attributes {
			key := string(kv.Key)
			if key == "lockwarden.lock.owner" || key == "lockwarden.lock.wait_ms" || kv.Value.String() == "" {
				continue
			}
			key = strings.TrimPrefix(strings.TrimPrefix(key, "lockwarden.lock."), "lockwarden.")
			attrs = append(attrs, key+"="+kv.Value.String())
		}
		status := ""
		if s.Status.Description != "" {
			status = "  error: " + s.Status.Description
		}
		fmt.Printf("%s%-*s %7.2fms  %s%s\n", strings.Repeat("  ", depth), 34-2*depth, s.Name,
			float64(s.EndTime.Sub(s.StartTime).Microseconds())/1000, strings.Join(attrs, " "), status)
		// The lock actor's Redis calls for the caller are events on the caller's span.
		for _, ev := range s.Events {
			var detail []string
			for _, kv := range ev.Attributes {
				detail = append(detail, strings.TrimPrefix(string(kv.Key), "lockwarden.")+"="+kv.Value.String())
			}
			fmt.Printf("%s· %-*s +%6.2fms  %s\n", strings.Repeat("  ", depth+1), 32-2*depth, ev.Name,
				float64(ev.Time.Sub(s.StartTime).Microseconds())/1000, strings.Join(detail, " "))
		}
		kids := children[s.SpanContext.SpanID()]
		slices.SortFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
}
