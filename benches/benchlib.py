"""What benches/peers.py, benches/generators.py and benches/rate_cost.py share: free ports, one
nginx serving a 14-byte file on CPU 0 (the generators' target), and processes pinned to a
CPU inside a cgroup v1 cpuacct group of their own, so their CPU time is exact (every process
and thread they ran, exited ones included). Where no cgroup can be made, the CPU time falls back
to utime + stime of the process tree plus its reaped children, from /proc. A command may also be
held to a share of its CPU (a cgroup v1 cpu group with a CFS quota), so that it, not the load
generator, sets the pace.
"""

import os
import re
import resource
import signal
import socket
import subprocess
import time

CGROUP = "/sys/fs/cgroup/cpuacct"
CPU_CGROUP = "/sys/fs/cgroup/cpu"
# The CFS period of a quota: short, so a held server runs in slices of a few ms, not 50 ms.
QUOTA_PERIOD_US = 10_000
HZ = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_nginx_conf(directory, workers, server):
    """Writes `directory`/nginx.conf: `workers` worker processes in the foreground, every path
    under `directory`, access logging off, keep-alive never ended by nginx, and `server` (the
    inside of its server block)."""
    path = os.path.join(directory, "nginx.conf")
    with open(path, "w") as f:
        f.write(f"""worker_processes {workers};
daemon off;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path {directory}/body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    server {{ {server} }}
}}
""")
    return path


def wrk_counts(out):
    """(requests, requests/s) from wrk's report."""
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return requests, float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def listening_port(proc):
    """The port in the first line `proc` prints ("listening on http://HOST:PORT", as our
    servers and the peers built here do), or None with the line when there is none."""
    line = proc.stdout.readline().decode()
    m = re.search(r":(\d+)", line.split("//", 1)[-1])
    return (int(m.group(1)), line) if m else (None, line)


def start_listening(name, argv, cpu, share=None):
    """Starts `argv` as a Pinned on `cpu` (held to `share` of it, see Pinned) and reads its
    ready line: (the Pinned, its port). One that prints no port is stopped, and an error."""
    server = Pinned(argv, cpu, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, share=share)
    port, line = listening_port(server.proc)
    if port is None:
        server.stop()
        raise RuntimeError(f"{name}: no ready line: {line!r}")
    return server, port


def tree_cpu(root):
    """utime + stime of `root` and its live descendants, plus the reaped children of each."""
    stats = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        stats[int(pid)] = (int(fields[1]), ticks)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in stats and pid not in tree:
            tree.add(pid)
            todo += [p for p, (ppid, _) in stats.items() if ppid == pid]
    return sum(stats[p][1] for p in tree) / HZ


def start_static_nginx(work):
    """One nginx (1 worker, pinned to CPU 0) serving a 14-byte index.html from `work`/www;
    returns the running process and its URL once it accepts connections."""
    port = free_port()
    www = os.path.join(work, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("Hello, World!\n")
    write_nginx_conf(work, 1, f"listen 127.0.0.1:{port} backlog=4096; root {www};")
    nginx = Pinned(["nginx", "-p", work, "-c", f"{work}/nginx.conf"], 0)
    wait_listening(port)
    return nginx, f"http://127.0.0.1:{port}/"


def wait_listening(port):
    """Waits (at most 10 s) until something accepts connections on `port`, then a moment."""
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    time.sleep(0.3)


class Pinned:
    """A command started on `cpu`, in a cgroup of its own when one can be made, in a session
    of its own (so stopping it reaches its children)."""

    count = 0

    def __init__(self, argv, cpu, stdout=None, stderr=None, env=None, share=None):
        """`share` (0 to 1): the most of `cpu` the command may use, held by a CFS quota; an
        error if no cpu cgroup can be made (a measurement that counts on it would be wrong)."""
        Pinned.count += 1
        name = f"sweetspot-bench-{os.getpid()}-{Pinned.count}"
        self.cgroup = os.path.join(CGROUP, name)
        try:
            os.mkdir(self.cgroup)
        except OSError:
            self.cgroup = None
        self.held = None
        if share is not None:
            self.held = os.path.join(CPU_CGROUP, name)
            os.mkdir(self.held)
            with open(os.path.join(self.held, "cpu.cfs_period_us"), "w") as f:
                f.write(str(QUOTA_PERIOD_US))
            with open(os.path.join(self.held, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(int(QUOTA_PERIOD_US * share)))
        argv = ["taskset", "-c", str(cpu)] + list(argv)
        joins = [g for g in (self.cgroup, self.held) if g]
        if joins:
            join = " && ".join(f"echo $$ > {g}/cgroup.procs" for g in joins)
            argv = ["sh", "-c", f'{join} && exec "$@"', "sh"] + argv
        self.proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr,
                                     stdin=subprocess.DEVNULL, start_new_session=True, env=env)

    def cpu(self):
        """CPU seconds so far."""
        if self.cgroup:
            with open(os.path.join(self.cgroup, "cpuacct.usage")) as f:
                return int(f.read()) / 1e9
        return tree_cpu(self.proc.pid)

    def cpu_split(self):
        """(user, system) CPU seconds so far, from the cgroup (None without one; the
        kernel's ticks, 1/HZ s each)."""
        if not self.cgroup:
            return None
        with open(os.path.join(self.cgroup, "cpuacct.stat")) as f:
            ticks = dict(line.split() for line in f)
        return int(ticks["user"]) / HZ, int(ticks["system"]) / HZ

    def wait(self, timeout=None):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        """SIGTERM to its session, SIGKILL after 10 s; then anything left in its cgroup."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.release()

    def release(self):
        """Removes its cgroups once nothing is left in them (killing what a daemon left)."""
        if self.cgroup:
            self._empty(self.cgroup)
            os.rmdir(self.cgroup)
            self.cgroup = None
        if self.held:
            self._empty(self.held)
            os.rmdir(self.held)
            self.held = None

    @staticmethod
    def _empty(group):
        for _ in range(50):
            with open(os.path.join(group, "cgroup.procs")) as f:
                left = [int(p) for p in f.read().split()]
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)


def run_pinned(argv, cpu, env=None):
    """Runs a command to its end on `cpu`; returns (stdout, stderr, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = Pinned(argv, cpu, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = p.proc.communicate()
    if p.cgroup:
        used = p.cpu()
    else:
        # Without a cgroup: what the command and the children it waited for used.
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    p.release()
    return out.decode(errors="replace"), err.decode(errors="replace"), used
