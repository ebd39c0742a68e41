fn main() { println!("{}", mote::version()); }
