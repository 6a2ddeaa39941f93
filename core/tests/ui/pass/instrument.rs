//! `#[waffle::instrument]` with each option, on free functions and methods.

#[waffle::instrument]
fn plain(step: u64, omega: f64, name: &str, owned: String, flag: bool, delta: i32) {
    let _ = (step, omega, name, owned, flag, delta);
}

#[waffle::instrument(name = "relax")]
fn renamed(sweep: u64) -> u64 {
    sweep * 2
}

#[waffle::instrument(skip(grid), fields(cells = grid.len() as u64, first = grid[0]))]
fn sweep(grid: &[f64], step: u64) -> f64 {
    grid.iter().sum::<f64>() + step as f64
}

#[waffle::instrument(skip_all)]
fn opaque(data: Vec<u8>, map: std::collections::HashMap<u32, u32>) -> usize {
    data.len() + map.len()
}

#[waffle::instrument(name = "all_options", skip(scratch), fields(n = scratch.len(), "k.v" = 1u8))]
fn all_options(scratch: Vec<u8>, level: u32) -> Option<u32> {
    if scratch.is_empty() {
        return None;
    }
    Some(level)
}

#[waffle::instrument]
fn generic<T: waffle::FieldValue + Copy>(value: T) -> T {
    value
}

struct Solver {
    tolerance: f64,
}

impl Solver {
    #[waffle::instrument(fields(tolerance = self.tolerance))]
    fn solve(&self, iterations: u32) -> f64 {
        self.tolerance * f64::from(iterations)
    }

    #[waffle::instrument(skip(tolerance))]
    fn reset(&mut self, tolerance: f64) {
        self.tolerance = tolerance;
    }

    #[waffle::instrument]
    fn consume(self) -> f64 {
        self.tolerance
    }
}

// An instrumented function whose argument names come from another macro's input.
macro_rules! instrumented {
    ($f:ident, $arg:ident) => {
        #[waffle::instrument]
        fn $f($arg: u64) -> u64 {
            $arg + 1
        }
    };
}
instrumented!(from_macro, count);

fn main() {
    assert_eq!(from_macro(1), 2);
    plain(1, 1.5, "x", String::from("y"), true, -4);
    assert_eq!(renamed(3), 6);
    assert_eq!(sweep(&[1.0, 2.0], 1), 4.0);
    assert_eq!(opaque(vec![1, 2], Default::default()), 2);
    assert_eq!(all_options(Vec::new(), 9), None);
    assert_eq!(all_options(vec![0], 9), Some(9));
    assert_eq!(generic(7u16), 7);
    let mut s = Solver { tolerance: 0.5 };
    assert_eq!(s.solve(4), 2.0);
    s.reset(0.25);
    assert_eq!(s.consume(), 0.25);
}
