"""A PostgreSQL server for one test, as the store's shell tests start one
(tests/store/postgres_cli_test.sh): initdb in a temporary directory, a Unix
socket there and no TCP port, as `nobody` when run as root; stopped at exit."""

import glob
import os
import shutil
import subprocess
import tempfile


class PostgresServer:
    def __init__(self):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: [int(x) for x in p.split("/")[-2].split(".") if x.isdigit()])
        if not bins or not os.access(os.path.join(bins[-1], "initdb"), os.X_OK):
            raise RuntimeError("no PostgreSQL server (Debian package postgresql; ./dev test installs it)")
        self.bin = bins[-1]
        self.dir = tempfile.mkdtemp(prefix="ipu-pypg-")
        self.run_as = []
        if os.getuid() == 0:
            shutil.chown(self.dir, user="nobody")
            self.run_as = ["runuser", "-u", "nobody", "--"]
        data = os.path.join(self.dir, "data")
        self._run("initdb", "-D", data, "-U", "ipu", "--auth=trust", "-E", "UTF8", "--no-sync")
        self._run("pg_ctl", "-D", data, "-l", os.path.join(self.dir, "server.log"), "-w", "-t", "60",
                  "-o", f"-k {self.dir} -c listen_addresses='' -c fsync=off", "start")
        self.uri = f"postgresql://ipu@/postgres?host={self.dir}"

    def _run(self, tool, *args):
        r = subprocess.run(self.run_as + [os.path.join(self.bin, tool), *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} failed: {r.stdout}{r.stderr}")

    def stop(self):
        subprocess.run(self.run_as + [os.path.join(self.bin, "pg_ctl"), "-D", os.path.join(self.dir, "data"), "-m", "fast", "-w", "stop"],
                       capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
