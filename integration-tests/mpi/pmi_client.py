"""A PMI-1 client of its own (not MPICH's): every task puts a key, meets
the others in a barrier and reads every task's key back. With the argument
"leave", task 1 exits without finalizing instead of entering the barrier."""
import os
import socket
import sys

rank = int(os.environ["PMI_RANK"])
size = int(os.environ["PMI_SIZE"])
conn = socket.socket(fileno=int(os.environ["PMI_FD"]))
stream = conn.makefile("rw")


def ask(line):
    stream.write(line + "\n")
    stream.flush()
    answer = stream.readline().strip()
    if " rc=0" not in answer:
        sys.exit(f"task {rank}: {line!r} answered {answer!r}")
    return answer


ask("cmd=init pmi_version=1 pmi_subversion=1")
name = ask("cmd=get_my_kvsname").split("kvsname=")[1]
mapping = ask(f"cmd=get kvsname={name} key=PMI_process_mapping").split("value=")[1]
ask(f"cmd=put kvsname={name} key=k{rank} value=from task {rank}")
if len(sys.argv) > 1 and sys.argv[1] == "leave" and rank == 1:
    sys.exit(0)
ask("cmd=barrier_in")
values = [
    ask(f"cmd=get kvsname={name} key=k{r}").split("value=")[1] for r in range(size)
]
print(f"{rank} {mapping} {','.join(values)}")
ask("cmd=finalize")
