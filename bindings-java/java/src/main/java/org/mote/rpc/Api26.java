package org.mote.rpc;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks a method that takes a {@code java.time} or {@code java.nio.file} argument, which Android
 * has only from API 26: the build's API 24 check (animal-sniffer, bindings-java/java/pom.xml)
 * skips it, since no caller on an older device can hold such an argument. Each such method has
 * an equivalent that API 24 has.
 */
@Retention(RetentionPolicy.CLASS)
@Target({ElementType.METHOD, ElementType.CONSTRUCTOR})
@interface Api26 {}
