"""Submit a command to the instance at $FLUXGATE_URI, print its events as they
happen, then its output, and exit with the job's success.

    FLUXGATE_URI=http://127.0.0.1:7000 python examples/submit_and_wait.py hostname
"""

import sys

import fluxgate


def main(argv):
    command = argv[1:] or ["hostname"]
    with fluxgate.Client() as client:
        jobid = client.submit(fluxgate.jobspec(command), waitable=True)
        print(f"submitted {fluxgate.f58(jobid)}")
        for event in client.eventlog(jobid, follow=True):
            print(f"{event.timestamp:.3f} {event.name}")
        for event in client.eventlog(jobid, "output"):
            if event.name == "data":
                sys.stdout.write(event.context.get("data", ""))
        result = client.wait(jobid)
        if not result.success:
            print(f"job failed: {result.error}", file=sys.stderr)
        return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
