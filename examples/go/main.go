// Command cotenant-go-service is a net/http service whose GOMAXPROCS is steered by cotenant's
// controller: every clock tick, as many Ps as the CPU quota and the host's neighbours leave
// room for.
//
//	go run .                # serves 127.0.0.1:8080 until Ctrl-C
//	curl 'http://127.0.0.1:8080/work?n=1000000'
//	go run . -once          # one request to itself, then exits (make test)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cotenant/cotenant/go/cotenant"
)

// maxN bounds the work of one request, and keeps the sum within a uint64.
const maxN = 1_000_000

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve on")
	once := flag.Bool("once", false, "listen on a free local port, check one request to itself, and exit")
	flag.Parse()
	log.SetPrefix("cotenant-go-service: ")
	log.SetFlags(0)
	if err := run(*addr, *once); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(addr string, once bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The controller: GOMAXPROCS follows the policy until Stop. A GOMAXPROCS set in the
	// environment is the user's choice: the controller then steers nothing (Steering is false).
	c, err := cotenant.Start(ctx, cotenant.Options{Logger: slog.Default()})
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		log.Printf("no controller on this system, GOMAXPROCS left to the runtime: %v", err)
	case err != nil:
		return err
	default:
		defer c.Stop() // hands GOMAXPROCS back to the runtime
		log.Printf("controller started: steering %v, GOMAXPROCS %d", c.Steering(), runtime.GOMAXPROCS(0))
	}

	if once {
		addr = "127.0.0.1:0"
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", work)
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	url := "http://" + listener.Addr().String()
	log.Printf("listening on %s", url)

	var checked error
	if once {
		checked = check(url)
	} else {
		select {
		case <-ctx.Done():
			log.Print("shutting down")
		case err := <-served:
			return err
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return checked
}

// work answers GET /work?n=N: the sum of the squares of 1..=N.
func work(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.ParseUint(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 1 || n > maxN {
		http.Error(w, fmt.Sprintf("n must be a whole number from 1 to %d, got %q", maxN, r.URL.Query().Get("n")),
			http.StatusBadRequest)
		return
	}
	var sum uint64
	for i := uint64(1); i <= n; i++ {
		sum += i * i
	}
	fmt.Fprintf(w, "sum of squares 1..=%d = %d (GOMAXPROCS %d)\n", n, sum, runtime.GOMAXPROCS(0))
}

// check is -once: the service answers a good and a bad request as it should.
func check(url string) error {
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := client.Get(url + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	status, body, err := get("/work?n=1000")
	if err != nil {
		return err
	}
	if status != http.StatusOK || !strings.HasPrefix(body, "sum of squares 1..=1000 = 333833500 ") {
		return fmt.Errorf("GET /work?n=1000: status %d, body %q", status, body)
	}
	log.Printf("GET /work?n=1000 -> %s", strings.TrimSpace(body))
	status, body, err = get("/work?n=lots")
	if err != nil {
		return err
	}
	if status != http.StatusBadRequest {
		return fmt.Errorf("GET /work?n=lots: expected 400, got status %d, body %q", status, body)
	}
	return nil
}
