// sweetspot's routes in Go's plain idiom, for the `go` preset: net/http starts a goroutine per
// connection, and Go's M:N scheduler runs the goroutines on GOMAXPROCS threads at once (the
// CPUs this process may run on by default, before Go 1.25 whatever its CPU quota).
//
//	go build -o server-go server.go && ./server-go -port PORT
//
// Routes: /hello, /fib?n=N (naive recursion, N <= 40), /sleep?ms=M (a timer: the goroutine
// parks, its thread runs another), /work?cpu_us=C&wait_ms=W (C µs of this goroutine's own
// CPU, then a wait of W ms). Anything else is 404; a bad number is 400. The ready line on
// stderr says GOMAXPROCS and the CPUs seen. Go's standard library only.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

// threadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID); the goroutine
// is locked to its thread while it spins, so this is the goroutine's own CPU.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return time.Duration(ts.Nano())
}

func spin(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	end := threadCPU() + d
	for threadCPU() < end {
	}
}

// number reads a query parameter in [0, max]; ok is false when it is present and bad.
func number(r *http.Request, key string, max int) (int, bool) {
	text := r.URL.Query().Get(key)
	if text == "" {
		return 0, true
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < 0 || v > max {
		return 0, false
	}
	return v, true
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write([]byte(body))
}

func main() {
	port := flag.Int("port", 0, "the port to listen on (127.0.0.1)")
	flag.Parse()
	if *port <= 0 {
		fmt.Fprintln(os.Stderr, "usage: server-go -port PORT")
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, "Hello, World!")
	})
	mux.HandleFunc("/fib", func(w http.ResponseWriter, r *http.Request) {
		n, ok := number(r, "n", 40)
		if !ok {
			reply(w, 400, "bad n\n")
			return
		}
		reply(w, 200, strconv.Itoa(fib(n))+"\n")
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		ms, ok := number(r, "ms", 60_000)
		if !ok {
			reply(w, 400, "bad ms\n")
			return
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		reply(w, 200, "slept "+strconv.Itoa(ms)+" ms\n")
	})
	mux.HandleFunc("/work", func(w http.ResponseWriter, r *http.Request) {
		cpu, ok1 := number(r, "cpu_us", 10_000_000)
		wait, ok2 := number(r, "wait_ms", 60_000)
		if !ok1 || !ok2 {
			reply(w, 400, "bad cpu_us or wait_ms\n")
			return
		}
		spin(time.Duration(cpu) * time.Microsecond)
		time.Sleep(time.Duration(wait) * time.Millisecond)
		reply(w, 200, "worked\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 404, "not found\n")
	})
	log.SetFlags(0)
	log.Printf("server-go on 127.0.0.1:%d, GOMAXPROCS %d, %d CPUs seen", *port, runtime.GOMAXPROCS(0), runtime.NumCPU())
	log.Fatal(http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *port), mux))
}
