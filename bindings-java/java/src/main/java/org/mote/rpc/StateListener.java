package org.mote.rpc;

/**
 * Told about a {@link Server}'s state. Registered with {@link Server#addStateListener}, it
 * first receives the state as it is at registration, then each state that differs from the
 * last one it received, ending with the stopped state ({@link ServerState#stopped()}).
 *
 * <p><b>Thread.</b> Every call is made on the server's state thread (a daemon thread named
 * {@code mote-rpc-state}), one call at a time, never on the thread that registered the
 * listener: an Android app posts to its main thread from here. A listener must return promptly
 * (the next states wait for it); it may call any method of the server, {@link Server#stop()}
 * included. An exception it throws is logged ({@code java.util.logging} logger
 * {@code org.mote.rpc}) and the listener stays registered.
 */
@FunctionalInterface
public interface StateListener {
    /**
     * The server's state changed (or the listener was just registered).
     *
     * @param state the new state
     */
    void onStateChanged(ServerState state);
}
