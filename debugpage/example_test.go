package debugpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockwarden/lockwarden/coordinator"
	"github.com/lockwarden/lockwarden/debugpage"
)

// The debug page mounted under /debug/lockwarden/ of an application's mux; here it is read through
// httptest, and Redis is miniredis.
func Example() {
	ctx := context.Background()
	mr, err := miniredis.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	c, err := coordinator.New(client)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mux := http.NewServeMux()
	mux.Handle("/debug/lockwarden/", http.StripPrefix("/debug/lockwarden", debugpage.Handler(c)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	m := c.Mutex("orders:42")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	// Open srv.URL + "/debug/lockwarden/" in a browser for the page; state.json is its data.
	resp, err := http.Get(srv.URL + "/debug/lockwarden/state.json")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var st debugpage.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	fmt.Println("this coordinator:", st.Coordinator == c.ID())
	for _, h := range st.Holds {
		fmt.Println("held:", h.Name, h.Kinds, "by its owner:", h.Owner == m.Owner())
	}
	// Output:
	// 200 application/json; charset=utf-8
	// this coordinator: true
	// held: orders:42 [plain] by its owner: true
}
