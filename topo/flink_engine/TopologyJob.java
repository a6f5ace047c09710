// The emulator's topology as a Flink job: one stream edge, sources -> workers, on a local MiniCluster.
//
// Python (topo/flink_engine/driver.py) writes the run's directory: job.properties and one input file per source
// (each tuple's input position, key hash, scheduled arrival and, for precomputed routing, its worker). This job reads
// them, runs, and writes one log and one word-count state per worker and one report per source, which Python turns
// into the same run directory as the other engines. Every time is System.nanoTime() relative to one start (t0) that
// every subtask of the one JVM agrees on.
//
// Sources emit on the spec's schedule and block where Flink blocks them (no buffer for the channel: backpressure).
// Workers are the emulator's FIFO servers: each tuple takes cost / capacity, its deadline chained to the one before
// while the worker is backlogged, so a late wake-up delays one tuple, not the worker's capacity.

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.Partitioner;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple5;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.NettyShuffleEnvironmentOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.source.legacy.RichParallelSourceFunction;
import org.apache.flink.util.Collector;

public class TopologyJob {
    // (input position, key hash, arrival ns since t0, worker or -1, padding): 27 bytes, 32 with Flink's 4-byte
    // length and 1-byte tag, so a 32 KiB network buffer holds exactly 1,024 tuples
    public static final TypeInformation<Tuple5<Long, Long, Long, Short, Byte>> RECORD =
            Types.TUPLE(Types.LONG, Types.LONG, Types.LONG, Types.SHORT, Types.BYTE);

    /** The start every subtask of this JVM agrees on: once every source and worker has opened. */
    static final class Start {
        static final AtomicInteger opened = new AtomicInteger();
        static final AtomicLong t0 = new AtomicLong(Long.MIN_VALUE);

        static void open() {
            opened.incrementAndGet();
        }

        /** Block until all `parties` opened; then t0 is 50 ms ahead of the moment the last one did. */
        static long await(int parties) throws InterruptedException {
            long deadline = System.nanoTime() + 120_000_000_000L;
            while (opened.get() < parties) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("not every subtask of the job opened within 120 s");
                }
                Thread.sleep(1);
            }
            t0.compareAndSet(Long.MIN_VALUE, System.nanoTime() + 50_000_000L);
            return t0.get();
        }
    }

    static Properties properties(Path dir) throws IOException {
        Properties p = new Properties();
        try (var in = Files.newInputStream(dir.resolve("job.properties"))) {
            p.load(in);
        }
        return p;
    }

    static ByteBuffer map(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size()).order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    static void write(Path file, long[]... columns) throws IOException {
        int n = columns.length == 0 ? 0 : columns[0].length;
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try (RandomAccessFile f = new RandomAccessFile(tmp.toFile(), "rw"); FileChannel ch = f.getChannel()) {
            ByteBuffer head = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            head.putLong(n).flip();
            ch.write(head);
            ByteBuffer body = ByteBuffer.allocate(Math.max(8, 8 * n)).order(ByteOrder.LITTLE_ENDIAN);
            for (long[] column : columns) {
                body.clear();
                body.asLongBuffer().put(column, 0, n);
                body.limit(8 * n);
                ch.write(body);
            }
        }
        Files.move(tmp, file);
    }

    /** A growable column of longs. */
    static final class Column {
        long[] a = new long[1024];
        int n;

        void add(long v) {
            if (n == a.length) {
                a = java.util.Arrays.copyOf(a, 2 * n);
            }
            a[n++] = v;
        }

        long[] done() {
            return java.util.Arrays.copyOf(a, n);
        }
    }

    /** One source: its share of the input, each tuple emitted at its arrival (or at once when saturating). */
    public static final class Source extends RichParallelSourceFunction<Tuple5<Long, Long, Long, Short, Byte>> {
        final String dir;
        final int parties;
        final boolean saturating;
        final long endNs;
        volatile boolean running = true;

        Source(String dir, int parties, boolean saturating, long endNs) {
            this.dir = dir;
            this.parties = parties;
            this.saturating = saturating;
            this.endNs = endNs;
        }

        @Override
        public void open(OpenContext context) {
            Start.open();
        }

        @Override
        public void run(SourceContext<Tuple5<Long, Long, Long, Short, Byte>> ctx) throws Exception {
            int index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            ByteBuffer in = map(Paths.get(dir, "source-" + index + ".bin"));
            int n = (int) in.getLong(0);
            LongBuffer seq = in.slice(8, 8 * n).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
            LongBuffer key = in.slice(8 + 8 * n, 8 * n).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
            LongBuffer at = in.slice(8 + 16 * n, 8 * n).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
            LongBuffer to = in.slice(8 + 24 * n, 8 * n).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer();
            long[] emitted = new long[n]; // when each tuple left (ns since t0)
            long[] held = new long[n]; // 1 where backpressure held the source since the tuple arrived
            long blockedNs = 0;
            long t0 = Start.await(parties);
            long lastReport = 0;
            long blockedSince = Long.MIN_VALUE; // the latest end of a collect that backpressure held
            Tuple5<Long, Long, Long, Short, Byte> record = new Tuple5<>(0L, 0L, 0L, (short) 0, (byte) 0);
            int i = 0;
            for (; i < n && running; i++) {
                long due = t0 + at.get(i);
                long now = System.nanoTime();
                if (saturating && now - t0 >= endNs) {
                    break;
                }
                if (!saturating && now < due) {
                    while ((now = System.nanoTime()) < due) {
                        LockSupport.parkNanos(due - now);
                    }
                }
                record.f0 = seq.get(i);
                record.f1 = key.get(i);
                record.f2 = saturating ? now - t0 : at.get(i);
                record.f3 = (short) to.get(i);
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(record);
                }
                long after = System.nanoTime();
                emitted[i] = now - t0;
                held[i] = blockedSince >= due ? 1 : 0;
                if (after - now > 200_000L) { // no buffer for the channel: Flink held the source
                    blockedNs += after - now;
                    blockedSince = after;
                }
                if (after - lastReport > 250_000_000L) {
                    System.out.println("emitted " + index + " " + (i + 1));
                    System.out.flush();
                    lastReport = after;
                }
            }
            System.out.println("emitted " + index + " " + i);
            System.out.flush();
            long[] count = {i, blockedNs};
            write(Paths.get(dir, "source-" + index + ".out"), java.util.Arrays.copyOf(emitted, i),
                    java.util.Arrays.copyOf(held, i));
            write(Paths.get(dir, "source-" + index + ".stats"), count);
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /** One worker: a FIFO server of cost / capacity per tuple that counts its keys (word count). */
    public static final class Worker extends RichFlatMapFunction<Tuple5<Long, Long, Long, Short, Byte>, Long> {
        final String dir;
        final long[] serviceNs;
        long t0 = Long.MIN_VALUE;
        long free; // when the tuple in service is done (the chained deadline)
        long returned = Long.MIN_VALUE; // when the last tuple's call returned
        transient Column seq, stamp, start, finish; // made in open(): a function is shipped before it runs
        transient HashMap<Long, long[]> counts;
        int index;

        Worker(String dir, long[] serviceNs) {
            this.dir = dir;
            this.serviceNs = serviceNs;
        }

        @Override
        public void open(OpenContext context) {
            index = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            seq = new Column();
            stamp = new Column();
            start = new Column();
            finish = new Column();
            counts = new HashMap<>();
            Start.open();
        }

        @Override
        public void flatMap(Tuple5<Long, Long, Long, Short, Byte> t, Collector<Long> out) {
            long now = System.nanoTime();
            if (t0 == Long.MIN_VALUE) {
                t0 = Start.t0.get();
                free = now;
            }
            // a tuple that was waiting when the last call returned starts at the last deadline (no wake-up delay);
            // Flink shows an operator no record before it takes it, so its queueing time is not known apart
            long begin = returned != Long.MIN_VALUE && now - returned < 100_000L ? free : now;
            long end = begin + serviceNs[index];
            while ((now = System.nanoTime()) < end) {
                LockSupport.parkNanos(end - now);
            }
            counts.computeIfAbsent(t.f1, k -> new long[1])[0]++;
            seq.add(t.f0);
            stamp.add(t.f2);
            start.add(begin - t0);
            finish.add(end - t0);
            free = end;
            returned = System.nanoTime();
        }

        @Override
        public void close() throws IOException {
            long[] keys = new long[counts.size()], n = new long[counts.size()];
            int i = 0;
            for (var e : counts.entrySet()) {
                keys[i] = e.getKey();
                n[i++] = e.getValue()[0];
            }
            write(Paths.get(dir, "state-" + index + ".bin"), keys, n);
            write(Paths.get(dir, "worker-" + index + ".bin"), seq.done(), stamp.done(), start.done(), finish.done());
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        Properties p = properties(dir);
        int sources = Integer.parseInt(p.getProperty("sources"));
        int workers = Integer.parseInt(p.getProperty("workers"));
        String[] service = p.getProperty("service_ns").split(",");
        long[] serviceNs = new long[workers];
        for (int w = 0; w < workers; w++) {
            serviceNs[w] = Long.parseLong(service[w]);
        }
        String routing = p.getProperty("routing"); // precomputed | rebalance | adaptive
        Configuration conf = new Configuration();
        conf.set(TaskManagerOptions.NUM_TASK_SLOTS, Math.max(sources, workers));
        conf.set(TaskManagerOptions.MEMORY_SEGMENT_SIZE, MemorySize.parse(p.getProperty("segment_bytes") + "b"));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MIN, MemorySize.parse(p.getProperty("network_memory")));
        conf.set(TaskManagerOptions.NETWORK_MEMORY_MAX, MemorySize.parse(p.getProperty("network_memory")));
        if (routing.equals("adaptive")) {
            conf.set(NettyShuffleEnvironmentOptions.ADAPTIVE_PARTITIONER_ENABLED, true);
            conf.set(NettyShuffleEnvironmentOptions.ADAPTIVE_PARTITIONER_MAX_TRAVERSE_SIZE,
                    Integer.parseInt(p.getProperty("max_traverse")));
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(conf);
        env.setBufferTimeout(Long.parseLong(p.getProperty("buffer_timeout_ms")));
        boolean saturating = Boolean.parseBoolean(p.getProperty("saturating"));
        long endNs = Long.parseLong(p.getProperty("end_ns"));
        DataStream<Tuple5<Long, Long, Long, Short, Byte>> in = env
                .addSource(new Source(dir.toString(), sources + workers, saturating, endNs), "sources", RECORD)
                .setParallelism(sources);
        DataStream<Tuple5<Long, Long, Long, Short, Byte>> edge = switch (routing) {
            case "precomputed" -> in.partitionCustom((Partitioner<Short>) (worker, n) -> worker, t -> t.f3);
            case "rebalance", "adaptive" -> in.rebalance();
            default -> throw new IllegalArgumentException("routing must be precomputed, rebalance or adaptive");
        };
        edge.flatMap(new Worker(dir.toString(), serviceNs), Types.LONG).setParallelism(workers).name("workers")
                .sinkTo(new DiscardingSink<>()).setParallelism(workers);
        env.execute("stream-groupings topology");
    }
}
