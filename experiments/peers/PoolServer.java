// sweetspot's routes behind the JDK's own HTTP server (com.sun.net.httpserver) on a fixed
// thread pool, for the `java` preset: `java PoolServer.java PORT THREADS` (the single-file
// launcher compiles it; no framework to download).
//
// Routes: /hello, /fib?n=N (naive recursion, N <= 45), /sleep?ms=M (Thread.sleep: the pool
// thread waits), /work?cpu_us=C&wait_ms=W (waits W ms, then spins C us of the thread's own CPU
// time, from ThreadMXBean). Anything else is 404; a bad number is 400.

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.Executors;

public class PoolServer {
    static final ThreadMXBean CPU = ManagementFactory.getThreadMXBean();

    static long fib(int n) {
        return n < 2 ? n : fib(n - 1) + fib(n - 2);
    }

    static void spin(long cpuUs) {
        long end = CPU.getCurrentThreadCpuTime() + cpuUs * 1000;
        while (CPU.getCurrentThreadCpuTime() < end) {
            Thread.onSpinWait();
        }
    }

    static Map<String, String> query(HttpExchange exchange) {
        Map<String, String> params = new HashMap<>();
        String raw = exchange.getRequestURI().getRawQuery();
        if (raw != null) {
            for (String pair : raw.split("&")) {
                String[] kv = pair.split("=", 2);
                params.put(kv[0], kv.length > 1 ? kv[1] : "");
            }
        }
        return params;
    }

    static long number(Map<String, String> params, String name, long top) {
        long value = Long.parseLong(params.getOrDefault(name, "0"));
        if (value < 0 || value > top) {
            throw new NumberFormatException(name);
        }
        return value;
    }

    static void reply(HttpExchange exchange, int status, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/plain");
        exchange.sendResponseHeaders(status, bytes.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(bytes);
        }
    }

    static void handle(HttpExchange exchange) throws IOException {
        String path = exchange.getRequestURI().getPath();
        Map<String, String> params = query(exchange);
        try {
            switch (path) {
                case "/hello" -> reply(exchange, 200, "Hello, World!");
                case "/fib" -> reply(exchange, 200, Long.toString(fib((int) number(params, "n", 45))));
                case "/sleep" -> {
                    Thread.sleep(number(params, "ms", 60000));
                    reply(exchange, 200, "slept");
                }
                case "/work" -> {
                    Thread.sleep(number(params, "wait_ms", 60000));
                    spin(number(params, "cpu_us", 10_000_000));
                    reply(exchange, 200, "worked");
                }
                default -> reply(exchange, 404, "not found\n");
            }
        } catch (NumberFormatException bad) {
            reply(exchange, 400, "bad number\n");
        } catch (InterruptedException stop) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: java PoolServer.java PORT THREADS");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        int threads = Integer.parseInt(args[1]);
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 1024);
        server.createContext("/", PoolServer::handle);
        server.setExecutor(Executors.newFixedThreadPool(threads));
        server.start();
    }
}
