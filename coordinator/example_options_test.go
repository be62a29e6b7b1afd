package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/messages"
	"github.com/lockwarden/lockwarden/telemetry"
)

func ExampleWithTracerProvider() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	// Any OpenTelemetry SDK and exporter; here one that keeps the spans in memory.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	c, err := coordinator.New(client, coordinator.WithTracerProvider(tp), coordinator.WithLockNameAttribute(true))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// The lock's spans are children of the span in the caller's context.
	ctx, checkout := tp.Tracer("shop").Start(context.Background(), "checkout")
	m := c.Mutex("cart:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	for _, s := range spans.GetSpans() { // the spans ended so far
		fmt.Println(s.Name, "in checkout:", s.Parent.SpanID() == checkout.SpanContext().SpanID())
	}
	checkout.End()
	// Output:
	// lockwarden.acquire in checkout: true
	// lockwarden.release in checkout: true
}

func ExampleWithMeterProvider() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	// Any OpenTelemetry SDK and exporter; here a reader that collects on demand.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	c, err := coordinator.New(client, coordinator.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	holder := c.Mutex("cart:42")
	if err := holder.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Mutex("cart:42").TryLock(ctx); err != nil {
		log.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	// Acquire calls by outcome (package telemetry lists the instruments and their attributes).
	acquisitions := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "lockwarden.lock.acquisitions" {
				for _, dp := range sum.DataPoints {
					outcome, _ := dp.Attributes.Value(telemetry.AttrOutcome)
					acquisitions[outcome.AsString()] += dp.Value
				}
			}
		}
	}
	fmt.Println("acquired:", acquisitions[telemetry.OutcomeAcquired])
	fmt.Println("not obtained:", acquisitions[telemetry.OutcomeNotObtained])
	// Output:
	// acquired: 1
	// not obtained: 1
}

func ExampleWithActorSystem() {
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	// The application's actor system (kept quiet here): its actors can then drive locks by message
	// through the coordinator's gateway, and own them (see package messages).
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
	)
	defer system.Shutdown() // after Close, which stops only the coordinator's actors
	c, err := coordinator.New(client, coordinator.WithActorSystem(system))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("same system:", c.ActorSystem() == system)

	reply, err := system.Root.RequestFuture(c.PID(), &messages.Status{Name: "orders:42", Owner: "job-7"}, 5*time.Second).Result()
	if err != nil {
		log.Fatal(err)
	}
	status := reply.(*messages.StatusReply)
	fmt.Println("locked:", status.Locked)
	// Output:
	// same system: true
	// locked: false
}

func ExampleWithReplicaSync() {
	// miniredis has no replicas, so there is nothing to wait for here: the coordinator skips WAIT on
	// a server that reports none. Against a master with replicas, an acquisition that fewer replicas
	// than asked acknowledge within the timeout is given back, and the call fails with ErrNotSynced.
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	// Every hold must reach 1 replica within 500ms (Redisson's rule); the default is a majority of
	// the replicas attached to the master, within 1s.
	c, err := coordinator.New(client, coordinator.WithReplicaSync(1, 500*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	m := c.Mutex("orders:42")
	switch err := m.Lock(ctx); {
	case errors.Is(err, coordinator.ErrNotSynced):
		fmt.Println("too few replicas acknowledged the hold; it was given back")
		return
	case err != nil:
		log.Fatal(err)
	}
	held, _ := m.IsHeld(ctx)
	fmt.Println("held:", held)
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}

	_, err = coordinator.New(client, coordinator.WithReplicaSync(1, 0)) // the timeout must be positive
	fmt.Println("invalid:", errors.Is(err, coordinator.ErrInvalidOption))
	// Output:
	// held: true
	// invalid: true
}
