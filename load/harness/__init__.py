"""One harness for every benchmark in ``load/``.

* :mod:`load.harness.stats`: ``percentile`` (nearest rank), ``median``, ``spread``, ``summary``;
* :mod:`load.harness.procfs`: CPU seconds and RSS of a process (and its descendants), this
  process's CPU, the machine's busy seconds, ``PhaseCpu`` and ``Interference``;
* :mod:`load.harness.profiler`: ``py-spy record`` around a pid for a phase, summaries;
* :mod:`load.harness.runner`: repetition order across systems, ``Processes`` (every process a
  run starts, stopped on exit, Ctrl-C or SIGTERM), ``run_main`` (the ``main`` of every benchmark:
  render, JSON, exit code);
* :mod:`load.harness.report`: machine description, goals, the console, a benchmark's command
  line (option specs, --quick/--smoke presets) and the head of its JSON;
* :mod:`load.harness.services`: our broker, gateways, dashboards and fleets as
  :class:`deploy.local.process.ManagedProcess` children (Mosquitto:
  :class:`deploy.local.mosquitto.MosquittoProcess`; peers: :mod:`load.peers`);
* :mod:`load.harness.kafka`: the quiet librdkafka logger, topic creation and deletion, end
  offsets, a producer that collects its delivery failures.
"""
