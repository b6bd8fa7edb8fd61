"""A local Kafka cluster over the real wire protocol, plus a real ZooKeeper ensemble.

The sandbox is the demo's default cluster, a rehearsal ground for on-call, and
the test bed the collectors are judged against, so its model follows Kafka's
documented semantics rather than whatever is convenient for the collectors.
"""
