"""One task of the PMI barrier benchmark: put a key, time the barrier, read
a neighbour's key back (the exchange happened), print when it entered and
left the barrier (seconds since the epoch; every task is on this machine)."""
import os
import socket
import sys
import time

rank = int(os.environ["PMI_RANK"])
size = int(os.environ["PMI_SIZE"])
stream = socket.socket(fileno=int(os.environ["PMI_FD"])).makefile("rw")


def ask(line):
    stream.write(line + "\n")
    stream.flush()
    answer = stream.readline().strip()
    if " rc=0" not in answer:
        sys.exit(f"task {rank}: {line!r} answered {answer!r}")
    return answer


ask("cmd=init pmi_version=1 pmi_subversion=1")
name = ask("cmd=get_my_kvsname").split("kvsname=")[1]
# A business card's size, as MPICH puts one per rank.
ask(f"cmd=put kvsname={name} key=card-{rank} value={'%064d' % rank}")
entered = time.time()
ask("cmd=barrier_in")
left = time.time()
peer = (rank + 1) % size
card = ask(f"cmd=get kvsname={name} key=card-{peer}").split("value=")[1]
if int(card) != peer:
    sys.exit(f"task {rank}: card-{peer} is {card!r}")
ask("cmd=finalize")
print(f"{entered:.6f} {left:.6f}")
