# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: labkit
#     language: python
#     name: labkit
# ---

# %% [markdown]
# # Quickstart: the whole labkit loop in a few cells
#
# This notebook measures something real on this machine in about a minute: the
# **idle-connection step** of the research brief's first experiment. A gRPC
# call whose request fits in TCP's initial congestion window (10 segments,
# 10 × 1408 B = 14080 B on this link) takes one round trip. After the
# connection has been idle for longer than one retransmission timeout, Linux
# (with `net.ipv4.tcp_slow_start_after_idle=1`, its default) shrinks the window
# back to those 10 segments, so a 16000 B request needs a second round trip.
# With the sysctl at 0 the window stays open and the same request takes one.
#
# The cells below
#
# 1. bring up the **local testbed**: two network namespaces, hosts `a` and
#    `b`, joined by an emulated WAN link, each with its own sshd;
# 2. **deploy** labkit to both hosts over SSH;
# 3. run a small **sweep**: gRPC calls from `a` to an echo server on `b`, two
#    request sizes, one second apart, with the sysctl at 0 and at 1;
# 4. show the **step table** and a **figure** of every call;
# 5. run **`labkit report`** on the run (the full idle-step notebook);
# 6. **tear the testbed down**.
#
# It needs root (the testbed makes namespaces), as `make demo` does. Run the
# cells one by one with Shift-Enter, or all of them from the *Run* menu.
# Interrupting a cell (the ■ button, or *Kernel → Interrupt*) is like Ctrl-C on
# the command line: the rows measured so far are kept, every process labkit
# started is stopped and the kernel settings are put back; running the cell
# again continues the run where it stopped.

# %% tags=["parameters"]
one_way_delay = "50ms"  # the emulated link's delay in each direction (the round trip is twice this)
sizes = [14000, 16000]  # request sizes in bytes: one inside the initial window of 14080 B, one just past it
repeats = 2  # calls per size and condition
testbed_name = "quickstart"  # the testbed's name: namespaces labkit-quickstart-a and -b
runs_dir = ""  # where the run is written; empty: data/runs of this checkout (or $LABKIT_RUNS)

# %% [markdown]
# ## 1. A testbed
#
# `labkit.testbed(...)` does what `labkit testbed up` does on the command line
# and returns the testbed: its hosts (namespace, the address SSH uses, the
# address of the emulated link) and `lab.inventory`, the file every experiment
# takes to find the hosts. Used in a `with` block it is taken down when the
# block ends; here the steps are spread over cells, so the last cell calls
# `lab.down()` (and it also goes when the kernel shuts down).

# %%
import labkit
from labkit import notebooks

lab = labkit.testbed(one_way_delay=one_way_delay, name=testbed_name)
lab

# %% [markdown]
# ## 2. Deploy
#
# The hosts run labkit's echo server and client themselves, so labkit installs
# its own wheel (and the Go tools it ships) on each over SSH. The testbed has
# no route to a package index: everything is uploaded. The first time this
# takes a few seconds; a host that already has this build is skipped.

# %%
lab.deploy();

# %% [markdown]
# ## 3. The sweep
#
# `labkit.sweep` is `labkit sweep` from Python. Before the calls it records
# each host's kernel and TCP settings, pings `b` from `a` (the RTT every
# latency is compared with) and runs a short iperf3. Then, for each value of
# the sysctl, it sets it on both hosts, opens one gRPC channel, makes one
# warm-up call and then `repeats` calls of each size one second apart (longer
# than the retransmission timeout, so the connection counts as idle), and
# finally puts the sysctl back as it found it. The bar counts calls.
#
# `resume="auto"`: if an earlier run of these very settings was interrupted,
# this finishes it instead of starting again.

# %%
run = labkit.sweep(lab.inventory, client="a", server="b", sizes=sizes, repeats=repeats, gaps_s=[1.0],
                   slow_start_after_idle=[0, 1], cc=["cubic"], name="quickstart",
                   runs_dir=runs_dir or notebooks.default_runs_dir(), resume="auto")
run

# %% [markdown]
# ## 4. The step
#
# The table `labkit sweep` prints: the median latency of each size and
# condition, as a multiple of the ping RTT. Shaded cells took a second round
# trip. With `ssai=1` the larger request should be shaded and the smaller not;
# with `ssai=0` neither. `run.summary()` is the same table as a DataFrame, and
# `run.samples()` every call, with the TCP state `ss` recorded around it.

# %%
run.summary(styled=True)

# %% [markdown]
# Every call, in round trips, against its request size; the dashed line is the
# initial window, 10 segments of the MSS the client's socket reported.

# %%
notebooks.step_figure(run)

# %% [markdown]
# ## 5. The report
#
# `run.report()` is `labkit report`: it executes the notebooks that apply to
# the run (for a sweep, `idle_step`) with papermill and writes the executed
# notebook, its figures and an HTML page into the run's `report/`. Below: its
# headline numbers. With two sizes it can only place the step between them
# (`step.window_from_bytes` to `step.window_to_bytes`); the `idle_step`
# notebook's own sample has ten sizes.

# %%
report = run.report(formats="png")
report

# %% [markdown]
# ## 6. Tear down
#
# Removes the namespaces, the link, the sshds and the testbed's state. The run
# stays in its directory: `labkit runs list` shows it, and any notebook here
# can read it (set its `run_dir` to the run's directory).

# %%
lab.down()
