GRADIENTS: dict = {}
def gradient_rule(*ops):
    def register(rule):
        for op in ops:
            GRADIENTS[op] = rule
        return rule
    return register
