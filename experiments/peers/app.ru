# sweetspot's routes in Ruby's plain idiom, for Puma (study 002 on its own runtime, MRI):
# a Rack app. MRI's global VM lock lets one thread of a process run Ruby code at a time, so
# Puma's threads help waits and its workers (processes) help CPU.
#
#   GET /hello                  200 "Hello, World!"
#   GET /fib?n=N                F(N) by naive recursion (N <= 35)
#   GET /sleep?ms=M             waits M ms
#   GET /work?cpu_us=C&wait_ms=W
#                               waits W ms, then spins C us of this thread's own CPU time
#                               (CLOCK_THREAD_CPUTIME_ID: a thread waiting for the lock does
#                               not advance it)
#
# Anything else is 404; a bad number is 400. Ruby's standard library only.
require 'uri'

def fib(n)
  n < 2 ? n : fib(n - 1) + fib(n - 2)
end

def spin(cpu_us)
  clock = Process::CLOCK_THREAD_CPUTIME_ID
  finish = Process.clock_gettime(clock) + cpu_us / 1e6
  nil while Process.clock_gettime(clock) < finish
end

def number(params, name, top)
  value = Integer(params.fetch(name, '0'), 10)
  raise ArgumentError, name unless (0..top).cover?(value)
  value
end

def text(status, body)
  [status, { 'content-type' => 'text/plain', 'content-length' => body.bytesize.to_s }, [body]]
end

run(lambda do |env|
  params = URI.decode_www_form(env['QUERY_STRING'] || '').to_h
  case env['PATH_INFO']
  when '/hello'
    text(200, 'Hello, World!')
  when '/fib'
    text(200, fib(number(params, 'n', 35)).to_s)
  when '/sleep'
    sleep(number(params, 'ms', 60_000) / 1000.0)
    text(200, 'slept')
  when '/work'
    wait_ms = number(params, 'wait_ms', 60_000)
    cpu_us = number(params, 'cpu_us', 10_000_000)
    sleep(wait_ms / 1000.0) if wait_ms.positive?
    spin(cpu_us)
    text(200, 'done')
  else
    text(404, 'not found')
  end
rescue ArgumentError
  text(400, 'bad number')
end)
