// What the JVM sizes its pools by (ForkJoinPool.commonPool, GC threads): availableProcessors.
public class Probe {
    public static void main(String[] args) {
        System.out.println(Runtime.getRuntime().availableProcessors());
    }
}
