struct Solver;

impl Solver {
    #[waffle::instrument(skip(self))]
    fn solve(&self, n: u64) -> u64 {
        n
    }
}

fn main() {
    Solver.solve(1);
}
