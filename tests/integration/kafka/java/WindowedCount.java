import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * A small Kafka Streams application (tests/integration/kafka/test_streams.py): counts the records of each
 * key per 10-second tumbling window of event time, and writes every updated count to the output
 * topic as key "KEY@WINDOW_START_MS", value the count as text.
 *
 *   WindowedCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [PROCESSING_GUARANTEE]
 *
 * Runs until SIGTERM (a shutdown hook closes the application); prints "RUNNING" once the
 * application has reached that state.
 */
public final class WindowedCount {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        if (args.length > 5) p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);

        StreamsBuilder b = new StreamsBuilder();
        b.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
            .count()
            .toStream()
            .map((w, n) -> KeyValue.pair(w.key() + "@" + w.window().start(), String.valueOf(n)))
            .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + before + " -> " + now);
            if (now == KafkaStreams.State.RUNNING) System.out.println("RUNNING");
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("UNCAUGHT " + e);
            e.printStackTrace(System.out);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            // a busy machine needs longer than the usual 10 s to commit and close (the test allows 60 s)
            boolean closed = streams.close(Duration.ofSeconds(50));
            // said here, not only by the state listener: close() returns once the state is
            // NOT_RUNNING, before the (daemon) close thread has called the listener, and the JVM
            // may halt first
            System.out.println("CLOSED " + closed + " " + streams.state());
            System.out.flush();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }
}
