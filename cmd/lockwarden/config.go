package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// config is what the flags say.
type config struct {
	addr             string
	cluster          bool
	sentinel         string
	master           string
	user, password   string
	sentinelUser     string
	sentinelPassword string
	db               int
	tls              bool
	tlsCA            string
	tlsCert, tlsKey  string
	tlsServerName    string
	tlsInsecure      bool
	timeout          time.Duration
	json             bool
	yes              bool
	stream           string
	from             string
	limit            int
}

// errUsage marks an error in the command line: exit status 2.
var errUsage = errors.New("usage")

// usageError is a command-line error with its message.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }
func (e usageError) Unwrap() error { return errUsage }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

const usageText = `usage: lockwarden [flags] COMMAND [ARGS]

commands:
  inspect NAME...      who holds NAME, its lease and fencing token, who waits
  list [PATTERN]       the names matching PATTERN (glob, default *), one line each
  processes            the lockwarden processes registered in Redis
  watch                follow the event journal stream (--stream) live
  force-unlock NAME    free a lock whoever holds it (asks first unless --yes)

flags (before or after the command):
`

// newFlags returns the flag set of every command, writing into cfg.
func newFlags(cfg *config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("lockwarden", flag.ContinueOnError)
	// The flag package's own messages are not written: a bad flag is one line (see run), and the usage
	// goes out only for -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defAddr := os.Getenv("REDIS_ADDR")
	if defAddr == "" {
		defAddr = "localhost:6379"
	}
	fs.StringVar(&cfg.addr, "addr", defAddr, "Redis address host:port; with --cluster, seed addresses, comma-separated ($REDIS_ADDR)")
	fs.BoolVar(&cfg.cluster, "cluster", false, "connect to a Redis Cluster")
	fs.StringVar(&cfg.sentinel, "sentinel", "", "Sentinel addresses, comma-separated: connect to the master named by --master")
	fs.StringVar(&cfg.master, "master", "mymaster", "the master's name at the sentinels")
	fs.StringVar(&cfg.user, "user", "", "ACL user name")
	fs.StringVar(&cfg.password, "password", os.Getenv("REDIS_PASSWORD"), "password ($REDIS_PASSWORD)")
	fs.StringVar(&cfg.sentinelUser, "sentinel-user", "", "ACL user name at the sentinels")
	fs.StringVar(&cfg.sentinelPassword, "sentinel-password", "", "password at the sentinels")
	fs.IntVar(&cfg.db, "db", 0, "database number (not with --cluster)")
	fs.BoolVar(&cfg.tls, "tls", false, "connect with TLS")
	fs.StringVar(&cfg.tlsCA, "tls-ca", "", "PEM file of the CA certificates to trust (implies --tls)")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "", "PEM file of the client certificate (implies --tls; with --tls-key)")
	fs.StringVar(&cfg.tlsKey, "tls-key", "", "PEM file of the client certificate's key")
	fs.StringVar(&cfg.tlsServerName, "tls-server-name", "", "server name to verify the certificate against")
	fs.BoolVar(&cfg.tlsInsecure, "tls-insecure", false, "do not verify the server's certificate")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "how long each command may take against Redis (not watch)")
	fs.BoolVar(&cfg.json, "json", false, "write JSON")
	fs.BoolVar(&cfg.yes, "yes", false, "force-unlock: do not ask for confirmation")
	fs.StringVar(&cfg.stream, "stream", "lockwarden:events", "watch: the event journal stream (coordinator.WithEventJournal)")
	fs.StringVar(&cfg.from, "from", "$", "watch: the entry id to read after: $ for new events only, 0 from the start")
	fs.IntVar(&cfg.limit, "limit", 0, "watch: stop after this many events (0: until interrupted)")
	return fs
}

// printUsage writes the command's usage, for -h.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, usageText)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseArgs parses flags that may come before and after the positional arguments, and returns the
// positional ones. Everything after "--" is positional.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(positional, rest...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// client returns the Redis client the flags describe.
func (cfg *config) client() (redis.UniversalClient, error) {
	tlsConfig, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	addrs := splitList(cfg.addr)
	switch {
	case cfg.cluster && cfg.sentinel != "":
		return nil, usagef("--cluster and --sentinel exclude each other")
	case cfg.cluster:
		if cfg.db != 0 {
			return nil, usagef("--db is not available with --cluster")
		}
		if len(addrs) == 0 {
			return nil, usagef("--addr: no address")
		}
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: cfg.user, Password: cfg.password,
			TLSConfig: tlsConfig, ContextTimeoutEnabled: true, MaxRetries: 1}), nil
	case cfg.sentinel != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: cfg.master, SentinelAddrs: splitList(cfg.sentinel),
			SentinelUsername: cfg.sentinelUser, SentinelPassword: cfg.sentinelPassword, Username: cfg.user,
			Password: cfg.password, DB: cfg.db, TLSConfig: tlsConfig, ContextTimeoutEnabled: true, MaxRetries: 1}), nil
	default:
		if len(addrs) != 1 {
			return nil, usagef("--addr: want one host:port without --cluster, got %q", cfg.addr)
		}
		return redis.NewClient(&redis.Options{Addr: addrs[0], Username: cfg.user, Password: cfg.password, DB: cfg.db,
			TLSConfig: tlsConfig, ContextTimeoutEnabled: true, MaxRetries: 1}), nil
	}
}

// tlsConfig returns the TLS settings the flags ask for, nil for none.
func (cfg *config) tlsConfig() (*tls.Config, error) {
	if !cfg.tls && cfg.tlsCA == "" && cfg.tlsCert == "" && cfg.tlsKey == "" && !cfg.tlsInsecure && cfg.tlsServerName == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.tlsServerName, InsecureSkipVerify: cfg.tlsInsecure} //nolint:gosec // the operator asks for it
	if cfg.tlsCA != "" {
		pem, err := os.ReadFile(cfg.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca: no PEM certificate in %s", cfg.tlsCA)
		}
		c.RootCAs = pool
	}
	if (cfg.tlsCert == "") != (cfg.tlsKey == "") {
		return nil, usagef("--tls-cert and --tls-key go together")
	}
	if cfg.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.tlsCert, cfg.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
