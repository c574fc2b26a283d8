//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds the directory's files
//! at compile time, and cargo does not otherwise know to look at it.

fn main() {
    println!("cargo::rerun-if-changed=migrations");
}
