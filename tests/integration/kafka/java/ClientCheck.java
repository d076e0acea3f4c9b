import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Kafka Java client against a broker, one mode per run (tests/integration/kafka/test_java_client.py):
 *
 *   admin BOOTSTRAP TOPIC          AdminClient operations, one line each: "OK op detail" or
 *                                  "FAIL op ExceptionClass: message"
 *   produce BOOTSTRAP TOPIC N      an idempotent producer (acks=all), N keyed records;
 *                                  "acked N", "partition P last OFFSET" per partition
 *   group BOOTSTRAP TOPIC GROUP N  two consumers of one group with the cooperative-sticky
 *                                  assignor (the second joins while the first consumes: an
 *                                  incremental rebalance: the first reads slowly until the
 *                                  second owns partitions), until N records were read and
 *                                  committed; "member I assigned [...]", "read N distinct D
 *                                  duplicates X", "committed P OFFSET"
 */
public final class ClientCheck {
    private static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    interface Op { String run() throws Exception; }

    private static int failures = 0;

    private static void op(String name, Op op) {
        try {
            String detail = op.run();
            System.out.println("OK " + name + " " + (detail == null ? "" : detail));
        } catch (Exception e) {
            Throwable t = e instanceof java.util.concurrent.ExecutionException && e.getCause() != null ? e.getCause() : e;
            System.out.println("FAIL " + name + " " + t.getClass().getSimpleName() + ": " + t.getMessage());
            failures++;
        }
        System.out.flush();
    }

    static void admin(String bootstrap, String topic) throws Exception {
        try (Admin a = Admin.create(base(bootstrap))) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            op("describeCluster", () -> {
                DescribeClusterResult c = a.describeCluster();
                return "nodes=" + c.nodes().get().size() + " controller=" + c.controller().get().id()
                    + " clusterId=" + (c.clusterId().get() != null);
            });
            op("createTopics", () -> {
                NewTopic t = new NewTopic(topic, 3, (short) 1).configs(Map.of("retention.ms", "3600000"));
                a.createTopics(List.of(t)).all().get();
                return topic;
            });
            op("listTopics", () -> String.valueOf(a.listTopics().names().get().contains(topic)));
            op("describeTopics", () -> {
                TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return "partitions=" + d.partitions().size() + " topicId=" + (d.topicId() != null);
            });
            op("describeConfigs", () -> {
                Config c = a.describeConfigs(List.of(res)).all().get().get(res);
                ConfigEntry e = c.get("retention.ms");
                return "retention.ms=" + (e == null ? null : e.value()) + " source=" + (e == null ? null : e.source());
            });
            op("incrementalAlterConfigs", () -> {
                Collection<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND));
                a.incrementalAlterConfigs(Map.of(res, ops)).all().get();
                Config c = a.describeConfigs(List.of(res)).all().get().get(res);
                return "retention.ms=" + c.get("retention.ms").value() + " cleanup.policy=" + c.get("cleanup.policy").value();
            });
            op("createPartitions", () -> {
                a.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
                return "partitions=" + a.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
            });
            op("listOffsets", () -> {
                TopicPartition tp = new TopicPartition(topic, 0);
                ListOffsetsResult.ListOffsetsResultInfo e = a.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get();
                ListOffsetsResult.ListOffsetsResultInfo l = a.listOffsets(Map.of(tp, OffsetSpec.latest())).partitionResult(tp).get();
                ListOffsetsResult.ListOffsetsResultInfo m = a.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).partitionResult(tp).get();
                return "earliest=" + e.offset() + " latest=" + l.offset() + " maxTimestamp=" + m.offset();
            });
            op("deleteRecords", () -> {
                TopicPartition tp = new TopicPartition(topic, 0);
                try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap))) {
                    for (int i = 0; i < 3; i++) p.send(new ProducerRecord<>(topic, 0, "k", "v" + i)).get();
                }
                a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(2))).all().get();
                return "lowWatermark=" + a.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
            });
            op("electLeaders", () -> {
                TopicPartition tp = new TopicPartition(topic, 0);
                Map<TopicPartition, Optional<Throwable>> r = a.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get();
                return r.get(tp).map(t -> t.getClass().getSimpleName()).orElse("elected");
            });
            op("listGroups", () -> String.valueOf(a.listGroups().all().get().size()));
            op("describeFeatures", () -> String.valueOf(a.describeFeatures().featureMetadata().get().finalizedFeatures().keySet()));
            op("deleteTopics", () -> {
                a.deleteTopics(List.of(topic)).all().get();
                return topic;
            });
        }
    }

    static Properties producerProps(String bootstrap) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
        return p;
    }

    static void produce(String bootstrap, String topic, int n) throws Exception {
        Map<Integer, Long> last = new TreeMap<>();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) fs.add(p.send(new ProducerRecord<>(topic, "key-" + (i % 37), "value-" + i)));
            p.flush();
            int acked = 0;
            for (Future<RecordMetadata> f : fs) {
                RecordMetadata m = f.get();
                acked++;
                last.merge(m.partition(), m.offset(), Math::max);
            }
            System.out.println("acked " + acked);
        }
        for (Map.Entry<Integer, Long> e : last.entrySet()) System.out.println("partition " + e.getKey() + " last " + e.getValue());
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group, int i) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + i);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "20");
        p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "300");
        p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
              "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");
        return new KafkaConsumer<>(p);
    }

    static void group(String bootstrap, String topic, String group, int n) throws Exception {
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        AtomicInteger reads = new AtomicInteger();
        AtomicBoolean done = new AtomicBoolean();
        AtomicBoolean joined = new AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        List<String> errors = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < 2; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                try (KafkaConsumer<String, String> c = consumer(bootstrap, group, id)) {
                    Set<TopicPartition> owned = new HashSet<>();
                    c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                        public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                            owned.removeAll(ps);
                            if (!ps.isEmpty()) commit(c);
                            System.out.println("member " + id + " revoked " + sorted(ps));
                        }
                        public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                            owned.addAll(ps);
                            if (id == 1 && !owned.isEmpty()) joined.set(true);
                            System.out.println("member " + id + " assigned " + sorted(ps) + " owns " + sorted(owned));
                        }
                    });
                    long deadline = System.currentTimeMillis() + 90_000;
                    while (!done.get() && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                            seen.merge(r.value(), 1, Integer::sum);
                            reads.incrementAndGet();
                        }
                        commit(c);
                        if (seen.size() >= n) done.set(true);
                        if (id == 0 && !joined.get()) Thread.sleep(100); // slow until member 1 shares the work
                    }
                    commit(c);
                } catch (Exception e) {
                    errors.add(e.toString());
                }
            }, "member-" + i);
            threads.add(t);
            t.start();
            if (i == 0) {
                long wait = System.currentTimeMillis() + 30_000;
                while (reads.get() == 0 && System.currentTimeMillis() < wait) Thread.sleep(50);
            }
        }
        for (Thread t : threads) t.join();
        int dups = 0;
        for (int v : seen.values()) dups += v - 1;
        System.out.println("read " + reads.get() + " distinct " + seen.size() + " duplicates " + dups);
        for (String e : errors) System.out.println("error " + e);
        try (Admin a = Admin.create(base(bootstrap))) {
            Map<TopicPartition, OffsetAndMetadata> offs = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (Map.Entry<String, OffsetAndMetadata> e : new TreeMap<>(stringKeys(offs)).entrySet())
                System.out.println("committed " + e.getKey() + " " + e.getValue().offset());
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            System.out.println("group state " + d.groupState() + " assignor " + d.partitionAssignor());
        }
    }

    /** commitSync, except while a rebalance runs (the next poll completes it; the commit is
     *  retried after it), as an application using the cooperative protocol does. */
    static void commit(KafkaConsumer<String, String> c) {
        try {
            c.commitSync();
        } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
            System.out.println("commit deferred: rebalance in progress");
        }
    }

    static Map<String, OffsetAndMetadata> stringKeys(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, OffsetAndMetadata> r = new HashMap<>();
        m.forEach((k, v) -> r.put(k.partition() + "", v));
        return r;
    }

    static List<String> sorted(Collection<TopicPartition> ps) {
        List<String> r = new ArrayList<>();
        for (TopicPartition p : ps) r.add(p.topic() + "-" + p.partition());
        java.util.Collections.sort(r);
        return r;
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "admin" -> admin(args[1], args[2]);
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
            case "group" -> group(args[1], args[2], args[3], Integer.parseInt(args[4]));
            default -> throw new IllegalArgumentException(args[0]);
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
